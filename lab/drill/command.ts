/**
 * `llm-ha drill`: checks the engines, starts the local fleet (real Redis, HAProxy,
 * PowerDNS, simulated GPU nodes with real agents), sends steady traffic, runs the fault
 * matrix, and reports a table (stdout), JSON (`--json`), logs and a timeline SVG (`--out`).
 * Everything it starts is stopped on exit, on Ctrl-C and on error.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ensureSystemDeps, SystemDepsError } from "../engines/system-deps";
import { terminalColumns } from "../../contracts/table";
import { renderHtmlReport } from "./html-report";
import { figuresLine, renderTable, standbyLine, summarize, type ScenarioSummary } from "./report";
import { runScenario, type RunResult } from "./run-scenario";
import { SCENARIOS, UnknownScenarioError, type ScenarioSpec } from "./scenarios";
import { estimateSeconds, selectScenarios, type DrillMode } from "./plan";
import { DEFAULT_HAPROXY_TUNING } from "../../contracts/haproxy-tuning";
import { CLIENT_TIMEOUT_MS, DRILL_AGENT_ENV, DRILL_AGENT_TUNING, DRILL_TUNED_BASELINE } from "./settings";
import { renderTimelineSvg } from "./svg";
import { alertNames, startDrillPrometheus } from "./alerts";
import { inDrillNetns, netnsSupport, reexecInNetns } from "../engines/netns";
import { createWorld, noLinksWhy } from "./world";
import { CHAOS_USAGE, chaosArgs, parseChaosFlag, runChaos, type ChaosFlags } from "./chaos/run";

const REPO = join(__dirname, "..", "..");

export const DRILL_USAGE = `Usage: llm-ha drill [flags]

Runs the local drill: real redis-server, HAProxy (one per AZ + baselines) and PowerDNS (LUA
ifurlup), N simulated GPU nodes with real agents, steady client traffic, and a fault matrix.

With no flag it runs a first, short matrix: one scenario per tier, the L4 outage included
(crash, az-gpu-loss, az-loss, leader-kill, edge-auth, global-outage; a few minutes).

  --full                  the whole fault matrix (every scenario, its own number of runs)
  --quick                 the short CI subset (crash ×3, gpu-lost, wedged, az-gpu-loss, standby-wake)
  --scenario NAME[,NAME]  run only these scenarios, in this order (see the list below)
  --check                 exit 1 when a scenario misses its target (or cannot be measured)
  --json FILE             write every figure as JSON, and the HTML report beside it (its name ending in .html)
  -o wide                 the table with every column (by default: the verdict first, fitted to
                          $COLUMNS, the sdk, cut and baseline columns left out)
  --out DIR               logs and timeline.svg (default: a new folder under the system tmp)
  --nodes N               simulated GPU nodes (default 6; at least 4)
  --runs N                runs of each selected scenario (default: its own count, e.g. crash ×5)
  --no-netns              stay in this network namespace even as root (the scenarios that cut
                          links are then skipped); as root the drill otherwise runs itself in
                          one of its own (unshare -n) where it can cut and slow links
  --help                  this text

The chaos campaign (npm run drill -- --chaos --seed N --minutes M):
${CHAOS_USAGE}`;

export class DrillUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DrillUsageError";
  }
}

export interface DrillArgs {
  scenario?: string;
  quick: boolean;
  /** The whole matrix (`--full`); neither this nor `quick`: the first-run matrix. */
  full?: boolean;
  check: boolean;
  json?: string;
  /** The table with every column (\`-o wide\`). */
  wide?: boolean;
  out?: string;
  nodes: number;
  /** Runs of each selected scenario instead of its own count. */
  runs?: number;
  help: boolean;
  /** Stay in the caller's network namespace (as root the drill otherwise makes one of its own). */
  noNetns?: boolean;
  /** The chaos campaign's flags (`--chaos`, `--seed`…), absent when none was given. */
  chaos?: ChaosFlags;
}

export function parseDrillArgs(argv: readonly string[]): DrillArgs {
  const a: DrillArgs = { quick: false, check: false, nodes: 6, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v.startsWith("--")) throw new DrillUsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--scenario":
        a.scenario = value();
        break;
      case "--quick":
        a.quick = true;
        break;
      case "--full":
        a.full = true;
        break;
      case "--check":
        a.check = true;
        break;
      case "--json":
        a.json = value();
        break;
      case "--out":
        a.out = value();
        break;
      case "-o":
      case "--output": {
        const v = value();
        if (v !== "wide" && v !== "text") throw new DrillUsageError(`${flag} must be text or wide (the JSON goes to a file: --json FILE), got ${JSON.stringify(v)}`);
        a.wide = v === "wide";
        break;
      }
      case "--nodes": {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 4 || n > 24) throw new DrillUsageError("--nodes must be an integer from 4 to 24");
        a.nodes = n;
        break;
      }
      case "--runs": {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 1 || n > 50) throw new DrillUsageError("--runs must be an integer from 1 to 50");
        a.runs = n;
        break;
      }
      case "--no-netns":
        a.noNetns = true;
        break;
      case "--help":
      case "-h":
        a.help = true;
        break;
      default: {
        const c: ChaosFlags = a.chaos ?? {};
        if (!parseChaosFlag(c, flag, value, (m) => new DrillUsageError(m))) throw new DrillUsageError(`unknown flag ${JSON.stringify(arg)}`);
        a.chaos = c;
      }
    }
  }
  if (a.quick && a.full) throw new DrillUsageError("--quick and --full are exclusive: pick one");
  if (a.chaos && !a.chaos.on) throw new DrillUsageError("--seed, --minutes, --chaos-concurrency and --chaos-all-azs go with --chaos");
  if (a.chaos?.on && (a.scenario || a.quick || a.full || a.runs)) throw new DrillUsageError("--chaos runs a campaign, not the fault matrix: drop --scenario, --quick, --full and --runs");
  return a;
}

export function drillMode(a: Pick<DrillArgs, "quick" | "full">): DrillMode {
  return a.full ? "full" : a.quick ? "quick" : "first";
}

export interface DrillReport {
  command: string;
  startedAt: string;
  durationMs: number;
  nodes: number;
  azs: { name: string; address: string; standby: boolean }[];
  fleetWired: boolean;
  settings: { agent: Record<string, string>; haproxy: object; baselineTuned: object; clientTimeoutMs: number };
  traffic: { sent: Record<string, number>; failed: Record<string, number> };
  pass: boolean;
  scenarios: (ScenarioSummary & { runs_detail: RunResult[] })[];
  outDir: string;
}

/**
 * What the planned scenarios need of the world beyond `--nodes`: spare instance slots, more
 * nodes in the first AZ (round-robin over 3 AZs puts ceil(n/3) there), and the first scenario's
 * agent settings from the start (no restart before it).
 */
export function worldNeeds(specs: readonly ScenarioSpec[], nodes: number): { spares: number; firstAzExtra: number; agentEnv?: Readonly<Record<string, string>> } {
  const firstAz = Math.ceil(nodes / (nodes >= 5 ? 3 : 2));
  const spares = Math.max(0, ...specs.map((s) => s.needsSpares ?? 0));
  const firstAzExtra = Math.max(0, ...specs.map((s) => (s.needsFirstAzNodes ?? 0) - firstAz));
  return { spares, firstAzExtra, ...(specs[0]?.agentEnv ? { agentEnv: specs[0].agentEnv } : {}) };
}

/** Runs the drill; returns the exit code. Stops everything it started before it returns. */
export async function runDrill(args: DrillArgs, io: { out: (s: string) => void; err: (s: string) => void } = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) }): Promise<number> {
  const t0 = Date.now();
  const now = (): number => Date.now() - t0;
  const progress = (line: string): void => io.err(`[drill ${(now() / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
  const netns = inDrillNetns();
  const selected = selectScenarios({ scenario: args.scenario, mode: drillMode(args), runs: args.runs });
  // Link cuts need the drill's own namespace: without one those scenarios are skipped, saying why.
  const why = noLinksWhy(args.noNetns);
  const skipped = selected.filter((p) => p.spec.needsNetns && !netns).map((p) => p.spec.name);
  const plan = selected.filter((p) => !(p.spec.needsNetns && !netns));
  if (skipped.length) progress(`skipping ${skipped.join(", ")}: they cut or slow links between drill members, which needs the drill's own network namespace (${why})`);
  const runs = plan.reduce((n, p) => n + p.runs, 0);
  progress(
    `${plan.length} scenario${plan.length === 1 ? "" : "s"}, ${runs} run${runs === 1 ? "" : "s"}: about ${Math.max(1, Math.round(estimateSeconds(plan) / 60))} min on 2 quiet cores` +
      (drillMode(args) === "first" && !args.scenario ? ` (--full: all ${SCENARIOS.length} scenarios, about ${Math.round(estimateSeconds(selectScenarios({ mode: "full" })) / 60)} min)` : ""),
  );
  const outDir = resolve(args.out ?? mkdtempSync(join(tmpdir(), "llmha-drill-")));
  mkdirSync(outDir, { recursive: true });
  const world = createWorld({ nodes: args.nodes, outDir, now, progress, netns, redisPaths: plan.some((p) => p.spec.needsRedisPaths), ...worldNeeds(plan.map((p) => p.spec), args.nodes) });
  const tl = world.tl;
  try {
    progress(`plan: ${plan.map((p) => `${p.spec.name}${p.runs > 1 ? `×${p.runs}` : ""}`).join(", ")}; logs in ${outDir}`);
    const ctx = await world.start();
    const st = ctx.stack;
    const fleetWired = ctx.fleetWired;
    const prom = await startDrillPrometheus(st, progress);
    if (prom) world.track(() => prom.stop());
    world.notePids();
    const summaries: DrillReport["scenarios"] = [];
    for (const { spec, runs } of plan) {
      const results: RunResult[] = [];
      for (let i = 1; i <= runs; i++) {
        progress(`${spec.name}${runs > 1 ? ` ${i}/${runs}` : ""}: ${spec.title}`);
        // The agent settings this scenario runs with (none: the drill's own); a change restarts the agents.
        if (!(await st.setAgentEnv(spec.agentEnv ?? null))) progress(`  not every agent HEALTHY again after the settings change`);
        const r = await runScenario(ctx, spec, i);
        // The shipped rules' verdict on this run (their windows are minutes long: an alert may carry over from the run before).
        if (prom && !r.notMeasured) {
          const fired = await prom.fired(t0 + r.injectAt, t0 + r.endAt).catch(() => []);
          r.extra.alerts = alertNames(fired).join(", ") || "none";
          if (spec.alertsExpected) r.extra.alertsMissing = spec.alertsExpected.filter((a) => !fired.some((f) => f.alertname === a)).length;
        }
        results.push(r);
        world.notePids();
        const f = (v: number | null): string => (v === null ? "never" : `${(v / 1000).toFixed(2)}s`);
        progress(
          r.notMeasured
            ? `  not measured: ${r.notMeasured}`
            : `  ${r.victims.join(",")}: detect ${f(r.detectMs)} L1 ${f(r.l1Ms)}${r.dnsMs !== null ? ` DNS ${f(r.dnsMs)}` : ""}${r.crossMs !== null ? ` cross ${f(r.crossMs)}` : ""}${r.leaderMs !== null ? ` leader ${f(r.leaderMs)}` : ""} recovery ${f(r.recoveryMs)} failed ${r.failed} (baselines ${r.failedBaseline.default}/${r.failedBaseline.tuned}) sdk ${r.failedSdk} cut ${r.cuts.all.cut}/${r.cuts.all.hadTo}${r.continued.n ? ` continued ${r.continued.n} (greedy exact ${r.continued.exact}/${r.continued.greedy})` : ""} false-fo ${r.falseFailovers}; baselines ${f(r.baselineMs.default)}/${f(r.baselineMs.tuned)}${typeof r.extra.cpuPressurePct === "number" ? `; cpu pressure ${r.extra.cpuPressurePct}%` : ""}${r.notes.length ? `; ${r.notes.join("; ")}` : ""}`,
        );
        if (r.notMeasured) break;
      }
      summaries.push({ ...summarize(spec, results), runs_detail: results });
    }
    await world.stopTraffic();
    const failed: Record<string, number> = {};
    for (const f of tl.failures) failed[f.client] = (failed[f.client] ?? 0) + 1;
    const pass = summaries.every((s) => s.pass === true);
    const report: DrillReport = {
      command: `llm-ha drill ${process.argv.slice(3).join(" ")}`.trim(),
      startedAt: new Date(t0).toISOString(),
      durationMs: now(),
      nodes: args.nodes,
      azs: st.azs.map((a) => ({ name: a.name, address: a.address, standby: a.standby })),
      fleetWired,
      settings: { agent: { ...DRILL_AGENT_ENV }, haproxy: { ...DEFAULT_HAPROXY_TUNING, ...DRILL_AGENT_TUNING }, baselineTuned: DRILL_TUNED_BASELINE, clientTimeoutMs: CLIENT_TIMEOUT_MS },
      traffic: { sent: tl.sent, failed },
      pass,
      scenarios: summaries,
      outDir,
    };
    const title = `llm-ha drill ${report.startedAt} — ${args.nodes} nodes, ${st.azs.length} AZs${args.scenario ? "" : ` (${drillMode(args)})`}`;
    const lanes = { nodes: st.nodes.map((n) => ({ id: n.id, az: n.az, proxy: st.azOf(n).proxy })), azs: report.azs };
    writeFileSync(join(outDir, "timeline.svg"), renderTimelineSvg(tl, { title, ...lanes }));
    writeFileSync(join(outDir, "timeline.json"), JSON.stringify(tl));
    // The page for a person: one panel per scenario; next to the JSON when there is one, always in the run's folder.
    const html = renderHtmlReport(tl, { title, scenarios: summaries, table: renderTable(summaries), svg: lanes });
    const htmlFile = args.json ? `${args.json.replace(/\.json$/i, "")}.html` : join(outDir, "report.html");
    writeFileSync(join(outDir, "report.html"), html);
    if (args.json) writeFileSync(args.json, JSON.stringify(report, null, 2) + "\n");
    if (args.json) writeFileSync(htmlFile, html);
    io.out(renderTable(summaries, { width: terminalColumns(), wide: args.wide ?? false }));
    io.out(
      `\nfailed column: llm-ha (baseline 2s×3 / baseline 0.5s×2); sdk: the official openai client with its default retries (what an application sees); ` +
        `cut: streams cut after their answer began, every client class; "(k had to)": their server or AZ proxy died under them, or (sdk) no server was left anywhere — ` +
        `every scenario's target is 0 beyond those; times p50/max over runs; "never" = not within the hold\n`,
    );
    io.out(`requests: ${Object.entries(tl.sent).map(([c, n]) => `${c} ${failed[c] ?? 0} failed of ${n}`).join("; ")}\n`);
    for (const s of summaries) for (const m of s.misses) io.out(`  ${s.name}: ${m}\n`);
    if (skipped.length) io.out(`skipped (no network namespace of the drill's own: ${why}): ${skipped.join(", ")}\n`);
    for (const line of summaries.flatMap((s) => s.runs_detail.map(standbyLine))) if (line) io.out(`${line}\n`);
    for (const line of summaries.flatMap((s) => s.runs_detail.map(figuresLine))) if (line) io.out(`${line}\n`);
    for (const s of summaries) {
      const fired = s.runs_detail.map((r) => r.extra.alerts).filter((a): a is string => typeof a === "string");
      if (fired.length) io.out(`alerts ${s.name}: ${[...new Set(fired)].join(" | ")}\n`);
    }
    io.out(`timeline: ${join(outDir, "timeline.svg")}${args.json ? `; json: ${args.json}` : ""}; report: ${htmlFile}\n`);
    return args.check && !pass ? 1 : 0;
  } finally {
    progress("stopping everything");
    await world.close();
  }
}

/** `llm-ha drill`. */
export async function drillCommand(argv: string[]): Promise<number> {
  let args: DrillArgs;
  try {
    args = parseDrillArgs(argv);
    selectScenarios({ scenario: args.scenario, mode: drillMode(args) });
  } catch (err) {
    if (err instanceof DrillUsageError || err instanceof UnknownScenarioError) {
      process.stderr.write(`llm-ha drill: ${err.message}\n\n${DRILL_USAGE}`);
      return 2;
    }
    throw err;
  }
  if (args.help) {
    process.stdout.write(DRILL_USAGE + `\nScenarios: ${selectScenarios({ mode: "full" }).map((p) => p.spec.name).join(", ")}\n`);
    return 0;
  }
  try {
    ensureSystemDeps({ repoRoot: REPO });
  } catch (err) {
    if (err instanceof SystemDepsError) {
      process.stderr.write(`llm-ha drill: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (!args.noNetns && !inDrillNetns() && netnsSupport().ok) {
    // As root: the same command again in a network namespace of its own, where links between
    // its members can be cut (iptables) without touching the host's network.
    process.stderr.write("llm-ha drill: running in a network namespace of its own (unshare -n; --no-netns to stay)\n");
    return reexecInNetns([process.execPath, ...process.execArgv, ...process.argv.slice(1)]);
  }
  return args.chaos?.on ? runChaos({ ...args, chaos: chaosArgs(args.chaos) }) : runDrill(args);
}
