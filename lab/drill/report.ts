/**
 * From runs to verdicts and text: per scenario a summary (p50/max when it repeats), the
 * target check, and the table on stdout. Pure; the JSON report is these objects.
 */
import { overloadNote } from "./pressure";
import { p50max } from "./timeline";
import type { RunResult } from "./run-scenario";
import type { ScenarioSpec, Targets } from "./scenarios";
import { renderTable as tableLines, type Column } from "../../contracts/table";

export interface ScenarioSummary {
  name: string;
  tier: string;
  title: string;
  runs: number;
  targets: Targets;
  /** true met, false missed, null not measured. */
  pass: boolean | null;
  misses: string[];
  notMeasured?: string;
  detect: Figure;
  l1: Figure;
  dns: Figure;
  cross: Figure;
  leader: Figure;
  recovery: Figure;
  baselineDefault: Figure;
  baselineTuned: Figure;
  failed: number;
  /** The SDK-default client class's failed requests (after its own retries). */
  failedSdk: number;
  /** Of those, the ones nothing could have saved: streams cut by their dying server or proxy, requests while no server was left. */
  failedSdkHadTo: number;
  /** Streams cut (every client class), and those that had to be. */
  cut: number;
  cutHadTo: number;
  /** The SDK class's streams cut, and those that had to be. */
  cutSdk: number;
  cutSdkHadTo: number;
  /** Answers the continuation relay carried on; greedy ones, and those that read as an undisturbed run. */
  continued: number;
  continuedGreedy: number;
  continuedExact: number;
  failedBaseline: { default: number; tuned: number };
  falseFailovers: number;
  staleWrites: number | null;
  /** No run injected a fault on any node (a no-fault scenario): no detection, removal or recovery to show. */
  noFault: boolean;
}

/** p50/max over runs; `never` counts runs where it never happened. */
export interface Figure {
  p50: number | null;
  max: number | null;
  never: number;
  runs: number;
}

export function figure(values: readonly (number | null)[]): Figure {
  const pm = p50max(values);
  return { p50: pm?.p50 ?? null, max: pm?.max ?? null, never: values.filter((v) => v === null).length, runs: values.length };
}

const TIME_TARGETS: [keyof Targets, keyof RunResult | `extra.${string}`, string][] = [
  ["l1Ms", "l1Ms", "L1"],
  ["crossMs", "crossMs", "cross-zone"],
  ["dnsMs", "dnsMs", "DNS"],
  ["leaderMs", "leaderMs", "new leader"],
  ["azHealthAfterStateMs", "extra.azHealthAfterStateMs", "/az/health after AZ state"],
  ["wakeDecisionMs", "extra.wakeDecisionMs", "standby wake decided"],
  ["recoveryMs", "recoveryMs", "recovery"],
  ["healthMs", "extra.healthMaxMs", "slowest /healthz or /az/health answer"],
  ["fast503Ms", "extra.max503Ms", "slowest 503"],
  ["registryMs", "extra.registryMs", "registry complete after the promotion"],
  ["firstL4Ms", "extra.firstL4Ms", "first L4 answer after the last server out"],
  ["fallbackMs", "extra.fallbackAfterFailureMs", "fallback started after the first capacity failure"],
  ["wedgedMetricsMs", "extra.wedgedMetricsMs", "wedged TGI/Triton/llama.cpp out of L1"],
  ["wedgedPlainMs", "extra.wedgedPlainMs", "wedged plain OpenAI-compatible server out of L1"],
  ["crashKindsMs", "extra.crashKindsMs", "crashed server of every other kind out of L1"],
];

/** Counts and ratios a scenario records in `extra`: each must be measured and at most its target. */
const COUNT_TARGETS: [keyof Targets, string, string][] = [
  ["crashedServers", "crashedServers", "inference servers crashed"],
  ["failedBeyondInFlight", "failedBeyondInFlight", "failed requests beyond those in flight at the kill"],
  ["retryAfterMissing", "retryAfterMissing", "503s without Retry-After"],
  ["otherFailures", "otherFailures", "failures other than the proxy's 503"],
  ["spreadRatio", "spreadRatio", "busiest backup server's share over its fair share"],
  ["dnsShareRatio", "dnsShareRatio", "busiest healthy AZ's share of DNS answers over its fair share"],
  ["tokenRegressions", "tokenRegressions", "fencing tokens that went backwards"],
  ["azHealth503", "azHealth503", "/az/health 503s for a live AZ"],
  ["practiceNotServed", "practiceNotServed", "practice wakes not recorded as served"],
  ["notReleased", "notReleased", "standby not back at zero after the hold"],
  ["refusedReached", "refusedReached", "refused requests that reached a server"],
  ["refusedNot401", "refusedNot401", "bad-key requests not answered 401"],
  ["revokedAccepted", "revokedAccepted", "requests a revoked key got through"],
  ["rotationFailed", "rotationFailed", "failed requests of the rotated key's client"],
  ["floodP50Ratio", "floodP50Ratio", "legitimate p50 under the flood over quiet, over the same ratio straight to the servers"],
  ["legitFailed", "legitFailed", "legitimate requests failed during the flood"],
  ["noisyUnlimited", "noisyUnlimited", "noisy tenant not limited (or 429 without Retry-After)"],
  ["floodNot401", "floodNot401", "flood requests not answered 401"],
  ["forgedWrites", "forgedWrites", "forged writes Redis accepted"],
  ["azStatesChanged", "azStatesChanged", "AZ states or tier changed by forgeries"],
  ["actuatorCalls", "actuatorCalls", "cloud actions after forgeries"],
  ["answersForged", "answersForged", "cache entries planted"],
  ["probesFailed", "probesFailed", "liveness/readiness probes failed under the flood"],
  ["checksUnanswered", "checksUnanswered", "HAProxy agent-checks unanswered under the flood"],
  ["canariesShort", "canariesShort", "canaries short of the number to send"],
];

function valueOf(r: RunResult, key: string): number | null {
  if (key.startsWith("extra.")) {
    const v = r.extra[key.slice(6)];
    return typeof v === "number" ? v : null;
  }
  const v = r[key as keyof RunResult];
  return typeof v === "number" ? v : null;
}

/** Checks every target of a scenario over its runs; a target whose figure was never measured is a miss. */
export function checkTargets(targets: Targets, runs: readonly RunResult[]): { pass: boolean; misses: string[] } {
  const misses: string[] = [];
  const times: [string, number | undefined, string][] = [
    ...TIME_TARGETS.map(([tk, rk, label]): [string, number | undefined, string] => [rk, targets[tk] as number | undefined, label]),
    ...Object.entries(targets.extraTimes ?? {}).map(([k, t]): [string, number, string] => [`extra.${k}`, t, k]),
  ];
  for (const [rk, t, label] of times) {
    if (t === undefined) continue;
    const vals = runs.map((r) => valueOf(r, rk));
    const never = vals.filter((v) => v === null).length;
    if (never) misses.push(`${label}: not seen in ${never} of ${vals.length} run(s) (target ≤ ${fmtS(t)})`);
    const max = Math.max(...vals.filter((v): v is number => v !== null));
    if (vals.some((v) => v !== null && v > t)) misses.push(`${label}: max ${fmtS(max)} > ${fmtS(t)}`);
  }
  const counts: [string, number | undefined][] = [...COUNT_TARGETS.map(([tk, key]): [string, number | undefined] => [key, targets[tk] as number | undefined]), ...Object.entries(targets.extraCounts ?? {})];
  const labels = new Map(COUNT_TARGETS.map(([, key, label]) => [key, label]));
  for (const [key, t] of counts) {
    const label = labels.get(key) ?? key;
    if (t === undefined) continue;
    const vals = runs.map((r) => r.extra[key]);
    const nums = vals.filter((v): v is number => typeof v === "number");
    if (nums.length < vals.length) misses.push(`${label}: not measured in ${vals.length - nums.length} of ${vals.length} run(s) (target ≤ ${fmtNum(t)})`);
    if (nums.some((v) => v > t)) misses.push(`${label}: ${fmtNum(Math.max(...nums))} > ${fmtNum(t)}`);
  }
  if (targets.l1P50Ms !== undefined) {
    const pm = p50max(runs.map((r) => r.l1Ms));
    if (pm && pm.p50 > targets.l1P50Ms) misses.push(`L1: p50 ${fmtS(pm.p50)} > ${fmtS(targets.l1P50Ms)}`);
  }
  const sum = (f: (r: RunResult) => number): number => runs.reduce((a, r) => a + f(r), 0);
  if (targets.failed !== undefined && sum((r) => r.failed) > targets.failed) misses.push(`failed requests: ${sum((r) => r.failed)} > ${targets.failed}`);
  if (targets.sdkFailed !== undefined && sum((r) => r.failedSdk ?? 0) > targets.sdkFailed) misses.push(`failed requests of the SDK class: ${sum((r) => r.failedSdk ?? 0)} > ${targets.sdkFailed}`);
  const avoidableCuts = sum((r) => r.cuts.all.cut - r.cuts.all.hadTo);
  if (avoidableCuts > (targets.avoidableCuts ?? 0)) misses.push(`streams cut that did not have to be: ${avoidableCuts} > ${targets.avoidableCuts ?? 0}`);
  const sdkAvoidable = sum(sdkAvoidableOf);
  if (sdkAvoidable > (targets.sdkAvoidable ?? 0)) misses.push(`SDK-class failures that did not have to be: ${sdkAvoidable} > ${targets.sdkAvoidable ?? 0}`);
  // Every scenario: a continued greedy answer reads exactly as an undisturbed run.
  const inexact = sum((r) => (r.continued?.greedy ?? 0) - (r.continued?.exact ?? 0));
  if (inexact > 0) misses.push(`continued greedy answers whose text differs from an undisturbed run: ${inexact} of ${sum((r) => r.continued?.greedy ?? 0)}`);
  if (targets.falseFailovers !== undefined && sum((r) => r.falseFailovers) > targets.falseFailovers) {
    misses.push(`false failovers: ${sum((r) => r.falseFailovers)} > ${targets.falseFailovers}`);
  }
  if (targets.staleWrites !== undefined) {
    if (runs.some((r) => r.staleWrites === null)) misses.push("stale writes: not measured");
    else if (sum((r) => r.staleWrites ?? 0) > targets.staleWrites) misses.push(`stale writes: ${sum((r) => r.staleWrites ?? 0)} > ${targets.staleWrites}`);
  }
  return { pass: misses.length === 0, misses };
}

/** SDK-class failures nothing could have saved: its streams cut by a death, and requests while no server was left. */
function sdkHadToOf(r: RunResult): number {
  return Math.min(r.failedSdk, r.cuts.sdk.hadTo + r.failedSdkNoServer);
}

function sdkAvoidableOf(r: RunResult): number {
  return r.failedSdk - sdkHadToOf(r);
}

export function summarize(spec: ScenarioSpec, runs: readonly RunResult[]): ScenarioSummary {
  const nm = runs.find((r) => r.notMeasured)?.notMeasured;
  const checked = nm ? { pass: null, misses: [`not measured: ${nm}`] } : checkTargets(spec.targets, runs);
  const overload = checked.pass === false ? overloadNote(runs) : null;
  if (overload) checked.misses.push(overload);
  const sum = (f: (r: RunResult) => number): number => runs.reduce((a, r) => a + f(r), 0);
  return {
    name: spec.name,
    tier: spec.tier,
    title: spec.title,
    runs: runs.length,
    targets: spec.targets,
    pass: checked.pass,
    misses: checked.misses,
    ...(nm ? { notMeasured: nm } : {}),
    detect: figure(runs.map((r) => r.detectMs)),
    l1: figure(runs.map((r) => r.l1Ms)),
    dns: figure(runs.map((r) => r.dnsMs)),
    cross: figure(runs.map((r) => r.crossMs)),
    leader: figure(runs.map((r) => r.leaderMs)),
    recovery: figure(runs.map((r) => r.recoveryMs)),
    baselineDefault: figure(runs.map((r) => r.baselineMs.default)),
    baselineTuned: figure(runs.map((r) => r.baselineMs.tuned)),
    failed: sum((r) => r.failed),
    failedSdk: sum((r) => r.failedSdk ?? 0),
    failedSdkHadTo: sum(sdkHadToOf),
    cut: sum((r) => r.cuts.all.cut),
    cutHadTo: sum((r) => r.cuts.all.hadTo),
    cutSdk: sum((r) => r.cuts.sdk.cut),
    cutSdkHadTo: sum((r) => r.cuts.sdk.hadTo),
    continued: sum((r) => r.continued?.n ?? 0),
    continuedGreedy: sum((r) => r.continued?.greedy ?? 0),
    continuedExact: sum((r) => r.continued?.exact ?? 0),
    failedBaseline: { default: sum((r) => r.failedBaseline.default), tuned: sum((r) => r.failedBaseline.tuned) },
    falseFailovers: sum((r) => r.falseFailovers),
    staleWrites: runs.some((r) => r.staleWrites !== null) ? sum((r) => r.staleWrites ?? 0) : null,
    noFault: runs.length > 0 && runs.every((r) => r.victims.length === 0 && r.detectMs === null && r.l1Ms === null && r.recoveryMs === null),
  };
}

export function fmtS(ms: number): string {
  return `${(ms / 1000).toFixed(2)}s`;
}

/** A count as is, a ratio with two decimals. */
function fmtNum(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

/** `0.41s`, `0.41/0.52s` (p50/max), `never`, `-` (not applicable). */
export function fmtFigure(f: Figure, applicable = true): string {
  if (!applicable || f.runs === 0) return "-";
  if (f.p50 === null) return "never";
  const base = f.runs > 1 && f.max !== f.p50 ? `${(f.p50 / 1000).toFixed(2)}/${fmtS(f.max!)}` : fmtS(f.max!);
  return f.never ? `${base} (${f.never}× never)` : base;
}

function targetText(t: Targets): string {
  const parts: string[] = [];
  if (t.l1P50Ms !== undefined) parts.push(`L1 p50≤${t.l1P50Ms / 1000}s`);
  if (t.l1Ms !== undefined) parts.push(`L1${t.l1P50Ms !== undefined ? " max" : ""}≤${t.l1Ms / 1000}s`);
  if (t.crossMs !== undefined) parts.push(`cross≤${t.crossMs / 1000}s`);
  if (t.azHealthAfterStateMs !== undefined) parts.push(`/az/health≤${t.azHealthAfterStateMs / 1000}s after state`);
  if (t.dnsMs !== undefined) parts.push(`DNS≤${t.dnsMs / 1000}s`);
  if (t.wakeDecisionMs !== undefined) parts.push(`wake decided≤${t.wakeDecisionMs / 1000}s`);
  if (t.leaderMs !== undefined) parts.push(`leader≤${t.leaderMs / 1000}s`);
  if (t.failed !== undefined) parts.push(`failed=${t.failed}`);
  if (t.falseFailovers !== undefined) parts.push(`false fo=${t.falseFailovers}`);
  if (t.staleWrites !== undefined) parts.push(`stale=${t.staleWrites}`);
  if (t.crashedServers !== undefined) parts.push(`crashed≤${t.crashedServers}`);
  if (t.recoveryMs !== undefined) parts.push(`recovery≤${t.recoveryMs / 1000}s`);
  if (t.failedBeyondInFlight !== undefined) parts.push(`failed beyond in-flight=${t.failedBeyondInFlight}`);
  if (t.healthMs !== undefined) parts.push(`health≤${t.healthMs / 1000}s`);
  if (t.fast503Ms !== undefined) parts.push(`503≤${t.fast503Ms / 1000}s`);
  if (t.retryAfterMissing !== undefined) parts.push(`503 w/o Retry-After=${t.retryAfterMissing}`);
  if (t.otherFailures !== undefined) parts.push(`other failures=${t.otherFailures}`);
  if (t.spreadRatio !== undefined) parts.push(`spread≤${t.spreadRatio}×fair`);
  if (t.dnsShareRatio !== undefined) parts.push(`DNS share≤${t.dnsShareRatio}×fair`);
  if (t.sdkFailed !== undefined) parts.push(`sdk failed=${t.sdkFailed}`);
  if (t.firstL4Ms !== undefined) parts.push(`first L4≤${t.firstL4Ms / 1000}s`);
  if (t.registryMs !== undefined) parts.push(`registry≤${t.registryMs / 1000}s`);
  if (t.tokenRegressions !== undefined) parts.push(`token regressions=${t.tokenRegressions}`);
  if (t.azHealth503 !== undefined) parts.push(`/az/health 503=${t.azHealth503}`);
  if (t.practiceNotServed !== undefined) parts.push(`practice served`);
  if (t.notReleased !== undefined) parts.push(`released`);
  if (t.forgedWrites !== undefined) parts.push(`forged writes=${t.forgedWrites}`);
  if (t.azStatesChanged !== undefined) parts.push(`AZ states changed=${t.azStatesChanged}`);
  if (t.actuatorCalls !== undefined) parts.push(`actuator calls=${t.actuatorCalls}`);
  if (t.answersForged !== undefined) parts.push(`answers forged=${t.answersForged}`);
  if (t.probesFailed !== undefined) parts.push(`probes failed=${t.probesFailed}`);
  if (t.checksUnanswered !== undefined) parts.push(`checks unanswered=${t.checksUnanswered}`);
  if (t.wedgedMetricsMs !== undefined) parts.push(`wedged (metrics)≤${t.wedgedMetricsMs / 1000}s`);
  if (t.wedgedPlainMs !== undefined) parts.push(`wedged (plain)≤${t.wedgedPlainMs / 1000}s`);
  if (t.crashKindsMs !== undefined) parts.push(`crash≤${t.crashKindsMs / 1000}s`);
  if (t.refusedReached !== undefined) parts.push(`refused reaching a server=${t.refusedReached}`);
  if (t.revokedAccepted !== undefined) parts.push(`revoked accepted=${t.revokedAccepted}`);
  if (t.rotationFailed !== undefined) parts.push(`rotation failed=${t.rotationFailed}`);
  if (t.floodP50Ratio !== undefined) parts.push(`p50 under flood≤${t.floodP50Ratio}×quiet`);
  if (t.noisyUnlimited !== undefined) parts.push(`noisy tenant 429+Retry-After`);
  if (t.canariesShort !== undefined) parts.push(`canaries≥1000`);
  // A scenario's own figures (the repair ladder's, the wake's): named as it records them.
  for (const [k, v] of Object.entries(t.extraTimes ?? {})) parts.push(`${k}≤${v / 1000}s`);
  for (const [k, v] of Object.entries(t.extraCounts ?? {})) parts.push(`${k}${v === 0 ? "=" : "≤"}${v}`);
  return parts.join(", ");
}

/**
 * The drill's columns, the verdict first: without \`-o wide\` the sdk, cut, continued and baseline columns
 * are left out and the target text shortened to fit the terminal.
 */
export const TABLE_COLUMNS: readonly Column[] = [
  { head: "result" },
  { head: "scenario" },
  { head: "runs", right: true },
  { head: "detect" },
  { head: "L1" },
  { head: "DNS" },
  { head: "cross/leader" },
  { head: "recovery" },
  { head: "failed" },
  { head: "sdk", wide: true },
  { head: "cut", wide: true },
  { head: "continued", wide: true },
  { head: "false fo" },
  { head: "base 2s×3", wide: true },
  { head: "base 0.5s×2", wide: true },
  { head: "target", shrink: true },
];

/** `n`, or `n (k had to)` when some of them had to be. */
function hadTo(n: number, k: number): string {
  return k > 0 ? `${n} (${k} had to)` : String(n);
}

/** One row per scenario, fitted to \`width\` unless \`wide\` (the default: every column, as in the JSON). */
export function renderTable(summaries: readonly ScenarioSummary[], o: { width?: number; wide?: boolean } = { wide: true }): string {
  const rows: string[][] = [];
  for (const s of summaries) {
    if (s.notMeasured) {
      rows.push(["NOT MEASURED", s.name, "0", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", targetText(s.targets)]);
      continue;
    }
    const l1Applies = (s.tier === "L1" || s.tier === "L2") && !s.noFault;
    const crossOrLeader = s.tier === "L2" ? fmtFigure(s.cross, s.targets.crossMs !== undefined || s.cross.p50 !== null) : s.targets.leaderMs !== undefined || s.leader.p50 !== null ? fmtFigure(s.leader) : "-";
    rows.push([
      s.pass ? "ok" : "MISS",
      s.name,
      String(s.runs),
      fmtFigure(s.detect, (s.tier !== "fleet" || s.name === "flap") && !s.noFault),
      fmtFigure(s.l1, l1Applies),
      fmtFigure(s.dns, s.tier === "L2" || s.tier === "L3"),
      crossOrLeader,
      // A fault that took nothing out of rotation (Redis restart) has no recovery to show.
      fmtFigure(s.recovery, s.recovery.never < s.recovery.runs || (s.tier !== "fleet" && !s.noFault)),
      `${s.failed} (${s.failedBaseline.default}/${s.failedBaseline.tuned})`,
      hadTo(s.failedSdk, s.failedSdkHadTo),
      hadTo(s.cut, s.cutHadTo),
      // Continued answers; of the greedy ones, those that read exactly as an undisturbed run.
      s.continued ? `${s.continued} (${s.continuedExact}/${s.continuedGreedy} exact)` : "0",
      String(s.falseFailovers),
      fmtFigure(s.baselineDefault, l1Applies),
      fmtFigure(s.baselineTuned, l1Applies),
      targetText(s.targets),
    ]);
  }
  return tableLines(TABLE_COLUMNS, rows, o).join("\n") + "\n";
}

/** A proxy scenario's key figures, one line (null when the run has none). */
export function figuresLine(r: RunResult): string | null {
  return typeof r.extra.figures === "string" ? `${r.scenario}: ${r.extra.figures}` : null;
}

/** The standby wake-up figures of a run, one line (null when the run has none). */
export function standbyLine(r: RunResult): string | null {
  const x = r.extra;
  if (!("wakeDecisionMs" in x)) return null;
  const f = (v: unknown): string => (typeof v === "number" ? fmtS(v) : "never");
  return (
    `${r.scenario}: wake decided ${f(x.wakeDecisionMs)}, wake call ${f(x.wakeCallMs)}, first standby node serving ${f(x.firstStandbyMs)} ` +
    `after the fault; failed requests meanwhile ${x.failedUntilStandby ?? "-"}; released ${f(x.releaseAfterHealMs)} after the heal` +
    (x.wakeToken !== null && x.wakeToken !== undefined ? ` (fencing token ${x.wakeToken})` : "")
  );
}
