/**
 * `llm-ha gameday`: the plan (`--dry-run`, infra/gameday/command.ts), a game day on the stack's
 * own account (`--stack ENV --scenario NAME --confirm ENV`), or the same runner against the
 * drill's world (`--local`). Every run writes the drill's report (JSON and HTML) with the
 * drill's targets for the scenario.
 */
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { GAMEDAY_SCENARIOS, inWindow, type GamedayScenario } from "../../contracts/gameday";
import { flagErrorMessage } from "../../contracts/did-you-mean";
import { gamedayCommand as planCommand, loadGamedayStack, scenarioArg, stackErrorExit } from "../../infra/gameday/command";
import { UsageError } from "../../infra/cost/command";
import { ensureSystemDeps, SystemDepsError } from "../engines/system-deps";
import { inDrillNetns, netnsSupport, reexecInNetns } from "../engines/netns";
import { GamedayError } from "./fis";
import { LOCAL_GAMEDAY_SCENARIOS, runLocalGameday } from "./local";
import { writeGamedayReport } from "./report";

export const GAMEDAY_USAGE = `Usage:
  llm-ha gameday --stack ENV --dry-run [--scenario NAME] [--json]
  llm-ha gameday --stack ENV --scenario NAME --confirm ENV [--endpoint URL] [--prometheus URL] [--json FILE]
  llm-ha gameday --local [--scenario NAME] [--hold SECONDS] [--no-drill] [--json FILE]

A game day: one AWS FIS experiment from the stack's llm-ha:gameday templates, with traffic
through the public edge, the fleet watched through Redis and Route53's health checks, and the
drill's report (JSON and HTML) judged against the drill's targets for the same scenario.

  --stack ENV        dev, staging, prod (a Pulumi.<ENV>.yaml beside Pulumi.yaml), or a path to one
  --dry-run          print the plan: each template's actions, blast radius, stop alarm and role
  --scenario NAME    ${GAMEDAY_SCENARIOS.join(", ")}
  --confirm ENV      the stack's name again: a game day starts only when it matches
  --endpoint URL     the public edge (default https://<llm-ha:dns.serviceName>)
  --prometheus URL   a Prometheus with the shipped rules (Amazon Managed Prometheus through a SigV4
                     proxy): the alerts that fired during the run go in the report
  --json FILE        write the report as JSON there, and its HTML beside it
  --local            the same runner against the drill's world, whose local cloud answers the FIS
                     calls; the drill's own scenario runs first, for comparison (${LOCAL_GAMEDAY_SCENARIOS.join(", ")})
  --hold SECONDS     --local: how long the experiment holds its fault (default 10)
  --no-drill         --local: skip the drill's own run before the game day
  --out DIR          --local: the run's folder (logs, report, pids.json; default a new one under /tmp)
  --nodes N          --local: simulated GPU nodes (default 6, 3 AZs)
  -h, --help         this text

A game day on the cloud reads, from the environment (never from flags): LLMHA_REDIS_URL (and
LLMHA_REDIS_USER, LLMHA_REDIS_PASSWORD_FILE) for the fleet, LLMHA_GAMEDAY_KEY for its own client
key (llm-ha keys add --tenant gameday), and the AWS credentials of whoever runs it. It refuses without
--confirm, outside llm-ha:gameday.window, and on a fleet that is not steady.

Exit status: 0 on target, 1 a target missed or the experiment did not complete, 2 refused or bad arguments.
`;

const OPTIONS = {
  stack: { type: "string" },
  "dry-run": { type: "boolean" },
  scenario: { type: "string" },
  confirm: { type: "string" },
  endpoint: { type: "string" },
  prometheus: { type: "string" },
  json: { type: "string" },
  local: { type: "boolean" },
  hold: { type: "string" },
  "no-drill": { type: "boolean" },
  out: { type: "string" },
  nodes: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

function scenarioOf(s: string | undefined, dflt?: GamedayScenario): GamedayScenario {
  if (s === undefined) {
    if (dflt) return dflt;
    throw new UsageError("--scenario is required");
  }
  return scenarioArg(s);
}

/** Why a game day may not start now on this stack, or null (confirmation, window). */
export function refusal(o: { stack: string; confirm?: string; window?: Parameters<typeof inWindow>[0]; now: Date; file: string; project: string }): string | null {
  if (o.confirm === undefined) return `a game day injects real faults into ${o.stack}: pass --confirm ${o.stack} to start one`;
  if (o.confirm !== o.stack) return `--confirm ${o.confirm} does not name the stack ${o.stack}`;
  if (!o.window) return `${o.project}:gameday.window is not set in ${o.file}: set when game days may start, e.g. {"days": ["Tue", "Wed", "Thu"], "from": "10:00", "to": "16:00", "timeZone": "Europe/Berlin"}`;
  if (!inWindow(o.window, o.now)) return `outside ${o.project}:gameday.window (${o.window.days.join(", ")} ${o.window.from}–${o.window.to} ${o.window.timeZone}); it is ${o.now.toISOString()}`;
  return null;
}

export async function gamedayCommand(argv: string[]): Promise<number> {
  if (argv.includes("--dry-run")) return planCommand(argv);
  let values: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };
  try {
    ({ values } = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }));
    if (values.help) {
      process.stdout.write(GAMEDAY_USAGE);
      return 0;
    }
    if (values.local) return await localCommand(values);
    if (!values.stack) throw new UsageError("--stack ENV (or --local) is required");
    const scenario = scenarioOf(values.scenario);
    const st = loadGamedayStack(values.stack);
    const why = refusal({ stack: st.stack, confirm: values.confirm, window: st.cfg.gameday.window, now: new Date(), file: st.file, project: st.project });
    if (why) throw new GamedayError(why);
    if (!st.enabled) throw new GamedayError(`${st.project}:gameday.enabled is not true in ${st.file}: no templates exist to start (llm-ha gameday --stack ${st.stack} --dry-run shows them)`);
    const { runCloudGameday } = await import("./cloud.js");
    return await runCloudGameday({ st, scenario, endpoint: values.endpoint, prometheus: values.prometheus, json: values.json });
  } catch (err) {
    if (err instanceof GamedayError) {
      process.stderr.write(`llm-ha gameday: ${err.message}\n`);
      return 2;
    }
    if (err instanceof Error && err.name === "TypeError" && "code" in err && String((err as { code?: string }).code).startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`llm-ha gameday: ${flagErrorMessage(err, Object.keys(OPTIONS))}\n\n${GAMEDAY_USAGE}`);
      return 2;
    }
    const code = stackErrorExit(err, GAMEDAY_USAGE);
    if (code !== null) return code;
    throw err;
  }
}

async function localCommand(values: { scenario?: string; hold?: string; "no-drill"?: boolean; nodes?: string; json?: string; out?: string }): Promise<number> {
  const scenario = scenarioOf(values.scenario, "az-power-interruption");
  if (!LOCAL_GAMEDAY_SCENARIOS.includes(scenario)) throw new UsageError(`--local offers ${LOCAL_GAMEDAY_SCENARIOS.join(", ")}; ${scenario} runs on the cloud only so far`);
  const hold = values.hold === undefined ? 10 : Number(values.hold);
  if (!(hold >= 3 && hold <= 300)) throw new UsageError(`--hold ${values.hold}: seconds from 3 to 300`);
  const nodes = values.nodes === undefined ? 6 : Number(values.nodes);
  if (!(Number.isInteger(nodes) && nodes >= 5 && nodes <= 12)) throw new UsageError(`--nodes ${values.nodes}: 5 to 12 (the local cloud needs a standby AZ)`);
  try {
    ensureSystemDeps({ repoRoot: join(__dirname, "..", "..") });
  } catch (err) {
    if (err instanceof SystemDepsError) throw new GamedayError(err.message);
    throw err;
  }
  if (!inDrillNetns() && netnsSupport().ok) {
    process.stderr.write("llm-ha gameday: running in a network namespace of its own (unshare -n)\n");
    return reexecInNetns([process.execPath, ...process.execArgv, ...process.argv.slice(1)]);
  }
  const t0 = Date.now();
  const now = (): number => Date.now() - t0;
  const progress = (line: string): void => void process.stderr.write(`[gameday ${(now() / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
  const outDir = resolve(values.out ?? mkdtempSync(join(tmpdir(), "llmha-gameday-")));
  mkdirSync(outDir, { recursive: true });
  const abort = new AbortController();
  const onSig = (): void => abort.abort();
  process.once("SIGINT", onSig);
  try {
    progress(`local game day ${scenario}: logs in ${outDir}`);
    const r = await runLocalGameday({ scenario, nodes, outDir, holdMs: hold * 1000, drillFirst: !values["no-drill"], netns: inDrillNetns(), now, progress, signal: abort.signal });
    const written = writeGamedayReport({ source: "local", spec: r.spec, run: r.gameday, drill: r.drill, outDir, json: values.json, startedAt: new Date(t0), command: `llm-ha gameday ${process.argv.slice(3).join(" ")}`.trim(), azs: r.activeAzs });
    process.stdout.write(written.text);
    return written.pass ? 0 : 1;
  } finally {
    process.removeListener("SIGINT", onSig);
  }
}
