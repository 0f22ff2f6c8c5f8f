/**
 * The rollout as lines: the short section of `llm-ha status` (step k of n, AZ, phase, the gates
 * and their verdicts, the reason) and the whole of `llm-ha rollout status` (every step with its
 * AZ and nodes, which one is under way, each gate's detail). Pure; colours as the fleet view's:
 * green passed or promoted, yellow waiting or paused, red failed or rolling back.
 */
import type { GateVerdict, RolloutPhase } from "../../fleet/rollout/types";
import { formatAge, pad, type Line, type Seg, type Style } from "./lines";
import { ROLLOUT_REQUEST_OVERDUE_MS, ROLLOUT_SHOWN_AFTER_END_MS } from "./rollout";
import type { RolloutStateView, RolloutStepState, RolloutView } from "./types";

export const PHASE_STYLE: Record<RolloutPhase, Style> = {
  switching: "cyan",
  baking: "cyan",
  paused: "yellow",
  "rolling-back": "red",
  promoted: "green",
  "rolled-back": "red",
  aborted: "yellow",
};
const VERDICT_STYLE: Record<GateVerdict["verdict"], Style> = { pass: "green", wait: "yellow", fail: "red" };
const STEP_STYLE: Partial<Record<RolloutStepState, Style>> = { baked: "green", restored: "yellow", restoring: "red", "to restore": "red", switching: "cyan", baking: "cyan", paused: "yellow" };

/** "4m 10s", "1h 05m", "12s". */
export function formatSpan(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** `rev-b` or `rev-b (image repo@sha256:…)`. */
export function revisionText(r: { revision: string; image?: string }): string {
  return `${r.revision || "?"}${r.image ? ` (image ${r.image})` : ""}`;
}

/** `step 2 of 3: az-a (AZ, 4 nodes)`, the step under way. */
export function stepText(s: RolloutStateView): string {
  const step = s.steps[s.step];
  if (!step) return `step ${s.step + 1} of ${s.steps.length}`;
  const what = step.kind === "standby" ? "standby AZ" : step.kind === "canary" ? "canary node" : "AZ";
  return `step ${s.step + 1} of ${s.steps.length}: ${step.az} (${what}, ${step.nodes.length} node${step.nodes.length === 1 ? "" : "s"})`;
}

/** The phase and what it is waiting for: `baking, 3m 20s left`, `paused (was baking)`. */
function phaseSegs(s: RolloutStateView, short = false): Seg[] {
  const segs: Seg[] = [{ t: s.phase, s: PHASE_STYLE[s.phase] }];
  if (s.phase === "paused" && s.pausedFrom) segs.push({ t: ` (was ${s.pausedFrom})`, s: "yellow" });
  if (s.bakeLeftMs !== null) {
    const left = short ? ` ${formatSpan(s.bakeLeftMs)} left` : `, ${formatSpan(s.bakeLeftMs)} of ${formatSpan(s.bakeMs)} bake left`;
    segs.push({ t: s.bakeLeftMs > 0 ? left : short ? ", ends when no gate waits" : ", bake done: ends when no gate waits" });
  }
  if (short) return segs;
  if (s.phase === "switching") {
    const step = s.steps[s.step];
    if (step) segs.push({ t: `, ${step.switched.length}/${step.nodes.length} nodes switched` });
  }
  if (s.phase === "rolling-back") {
    const step = s.steps[s.step];
    if (step) segs.push({ t: `, ${step.switched.length}/${step.nodes.length} nodes of ${step.az} restored` });
  }
  return segs;
}

/** The gates on one line, what holds the step first: `fail latency  wait corruption  5 of 7 pass`. */
function gateSegs(gates: GateVerdict[]): Seg[] {
  const of = (v: GateVerdict["verdict"]): string[] => gates.filter((g) => g.verdict === v).map((g) => g.gate);
  const segs: Seg[] = [];
  for (const v of ["fail", "wait"] as const) if (of(v).length) segs.push({ t: v, s: VERDICT_STYLE[v] }, { t: ` ${of(v).join(", ")}  ` });
  const pass = of("pass").length;
  segs.push({ t: pass === gates.length ? `all ${pass} pass` : `${pass} of ${gates.length} pass`, s: pass === gates.length ? "green" : undefined });
  return segs;
}

function pendingLine(v: RolloutView, now: number, label: Seg): Line[] {
  const p = v.pending;
  if (!p) return [];
  const what = p.op === "start" ? `start ${p.id} to ${revisionText(p.to ?? { revision: "?" })}` : `${p.op} ${p.id}`;
  const overdue = now - p.at > ROLLOUT_REQUEST_OVERDUE_MS;
  const state = overdue ? "not acted on: refused by the leader, or no leader runs" : "pending: the leader acts on its next period";
  return [[label, { t: `requested ${formatAge(now - p.at)}: ${what}, ${state}`, s: overdue ? "yellow" : "cyan" }]];
}

/** `llm-ha status`'s section: shown while a rollout is active, ended within the hour, or a request pends. */
export function rolloutSection(v: RolloutView | null | undefined, now: number): Line[] {
  if (!v || !v.shown) return [];
  const label: Seg = { t: pad("rollout", 9), s: "bold" };
  const indent: Seg = { t: pad("", 9) };
  const lines: Line[] = [];
  if (v.error) lines.push([label, { t: `cannot read the leader's state: ${v.error}`, s: "red" }]);
  const s = v.last;
  if (s && (s.active || now - s.since <= ROLLOUT_SHOWN_AFTER_END_MS)) {
    const step = s.steps[s.step];
    const where = `step ${s.step + 1}/${s.steps.length}${step ? ` ${step.az} (${step.kind === "standby" ? "standby AZ" : step.kind === "canary" ? "canary node" : "AZ"}, ${step.nodes.length} node${step.nodes.length === 1 ? "" : "s"})` : ""}`;
    const head: Line = [lines.length ? indent : label, { t: `${s.id} ` }, ...phaseSegs(s, true), { t: `  ${where}` }, { t: `  ${s.from.revision || "?"} → ${s.to.revision || "?"}` }, { t: `  since ${formatAge(s.phaseAgeMs)}`, s: "dim" }];
    lines.push(head);
    if (s.gates.length && s.active) lines.push([indent, { t: "gates  ", s: "dim" }, ...gateSegs(s.gates)]);
    // A failed gate's detail, unless the reason (a rollback's) says it already.
    for (const g of s.gates.filter((x) => x.verdict === "fail" && !s.reason.includes(x.detail))) lines.push([indent, { t: `${g.gate} failed: ${g.detail}`, s: "red" }]);
    if (s.reason) lines.push([indent, { t: s.reason, s: s.phase === "rolled-back" || s.phase === "rolling-back" ? "red" : undefined }]);
  }
  lines.push(...pendingLine(v, now, lines.length ? indent : label));
  return lines;
}

/** `llm-ha rollout status`: the whole rollout (or the fleet's revision when none ran). */
export function rolloutReport(v: RolloutView | null, now: number, cluster: string): Line[] {
  const lines: Line[] = [];
  const fleet: Line = [{ t: pad("fleet", 9), s: "bold" }, { t: `revision ${v?.current ?? "not set by a rollout yet"}` }];
  if (v?.allow.length) fleet.push({ t: `  agents accept ${v.allow.join(", ")}`, s: "dim" });
  const s = v?.last ?? null;
  if (!s) {
    lines.push([{ t: "rollout", s: "bold" }, { t: `  cluster ${cluster}: ${v?.error ? `cannot read the leader's state: ${v.error}` : "no rollout has run"}`, s: v?.error ? "red" : "dim" }], fleet);
    if (v) lines.push(...pendingLine(v, now, { t: pad("request", 9), s: "bold" }));
    return lines;
  }
  lines.push(
    [{ t: `rollout ${s.id}`, s: "bold" }, { t: `  cluster ${cluster}  by ${s.by || "?"}  started ${new Date(s.startedAt).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC")}`, s: "dim" }],
    [{ t: pad("phase", 9), s: "bold" }, ...phaseSegs(s), { t: `  since ${formatAge(s.phaseAgeMs)}`, s: "dim" }],
    [{ t: pad("change", 9), s: "bold" }, { t: `${revisionText(s.from)} → ${revisionText(s.to)}` }, { t: `  bake ${formatSpan(s.bakeMs)} per step`, s: "dim" }],
    fleet,
    [],
    [{ t: "steps", s: "bold" }, { t: s.active ? `  ${stepText(s)} under way` : "", s: "dim" }],
  );
  const azW = Math.min(20, Math.max(2, ...s.steps.map((x) => [...x.az].length)));
  for (const [i, step] of s.steps.entries()) {
    const here = s.active && i === s.step;
    const count = step.switched.length ? `  ${step.switched.length}/${step.nodes.length} ${s.phase === "rolling-back" && i === s.step ? "restored" : "switched"}` : "";
    const st = s.stepStates[i];
    lines.push([
      { t: here ? "  → " : "    ", s: here ? "bold" : undefined },
      { t: pad(`${i + 1}/${s.steps.length}`, 6) },
      { t: pad(step.az, azW + 2), s: here ? "bold" : undefined },
      { t: pad(step.kind, 9), s: "dim" },
      { t: pad(st, 11), s: STEP_STYLE[st] },
      { t: count },
      { t: `  ${step.nodes.join(", ") || "no nodes"}`, s: "dim" },
    ]);
  }
  lines.push([], [{ t: "gates", s: "bold" }, { t: s.gates.length ? `  of ${s.steps[s.step]?.az ?? "the step"}, the new revision against the old in the same window` : "  none reported yet", s: "dim" }]);
  const gW = Math.max(...s.gates.map((g) => g.gate.length), 4);
  for (const g of s.gates) lines.push([{ t: `    ${pad(g.gate, gW + 2)}` }, { t: pad(g.verdict, 6), s: VERDICT_STYLE[g.verdict] }, { t: g.detail, s: g.verdict === "fail" ? "red" : undefined }]);
  lines.push([], [{ t: pad("reason", 9), s: "bold" }, { t: s.reason || "-", s: s.phase === "rolled-back" || s.phase === "rolling-back" ? "red" : undefined }]);
  if (v) lines.push(...pendingLine(v, now, { t: pad("request", 9), s: "bold" }));
  return lines;
}
