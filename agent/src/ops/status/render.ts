/**
 * The status view as terminal lines. Pure: view in, lines out. Every line fits `width`
 * columns (100 by default; long reasons and event texts end in "…"); ANSI colours only
 * when asked (`color`: the command passes true on a TTY without NO_COLOR). Red is out or
 * down, yellow degraded or unknown, green healthy.
 */
import type { AzRow, EventTone, FleetView, NodeRow } from "./types";
import { fit, formatAge, pad, padL, paint, styleOf, type Line, type RenderOptions, type Seg, type Style } from "./lines";

import { rolloutSection } from "./rollout-render";

export { formatAge, SGR, styleOf, type RenderOptions, type Style } from "./lines";

export const STATUS_WIDTH = 100;

const TONE_STYLE: Record<EventTone, Style | undefined> = { ok: "green", warn: "yellow", bad: "red", info: undefined };

function leaderLine(v: FleetView): Line {
  const l = v.leader;
  const label = { t: pad("leader", 9), s: "bold" } as Seg;
  if (!l.holder) {
    const highest = l.highestToken !== null ? `  highest accepted token ${l.highestToken}` : "";
    return [label, { t: "none: lease free, AZ states and tier not refreshed", s: "red" }, { t: highest, s: "dim" }];
  }
  const line: Line = [label, { t: l.holder, s: "cyan" }, { t: `  token ${l.token}` }];
  if (l.highestToken !== null && l.token !== null && l.token < l.highestToken) {
    line.push({ t: `  below the highest accepted token ${l.highestToken} (${l.highestHolder ?? "?"}): its writes are refused`, s: "yellow" });
  } else if (l.highestToken !== null) {
    line.push({ t: `  highest accepted ${l.highestToken}`, s: "dim" });
  }
  if (l.ttlMs !== null) line.push({ t: `  lease ${(l.ttlMs / 1000).toFixed(1)}s left`, s: "dim" });
  return line;
}

function tierLine(v: FleetView): Line {
  const label = { t: pad("tier", 9), s: "bold" } as Seg;
  const t = v.tier;
  if (!t) return [label, { t: "not published yet", s: "dim" }];
  const line: Line = [label, { t: t.level, s: styleOf(t.level) }, { t: `  ${t.reason}` }, { t: `  (refreshed ${formatAge(t.ageMs)})`, s: "dim" }];
  if (t.stale) line.push({ t: "  stale: no leader refreshed it", s: "yellow" });
  return line;
}

/** L4 and the fallback's queue, depth first (it is what a long line must not lose). */
function l4Line(v: FleetView): Line {
  const f = v.fallback;
  const line: Line = [{ t: pad("L4", 9), s: "bold" }];
  if (f.l4 === null) line.push({ t: "unknown (no tier)", s: "yellow" });
  else line.push(f.l4 ? { t: "ACTIVE", s: "red" } : { t: "inactive", s: "green" });
  const q = f.queue;
  if (!q) line.push({ t: "  queue not published (no fallback with Kafka)", s: "dim" });
  else {
    const depth = q.depth === null ? "unknown" : `${q.depth} request${q.depth === 1 ? "" : "s"}`;
    line.push({ t: "  queue " }, { t: depth, s: q.depth ? "yellow" : undefined });
    if (q.stale) line.push({ t: "  stale: not sampled", s: "yellow" });
    line.push({ t: `  (${q.topic}, ${formatAge(q.ageMs)})`, s: "dim" });
  }
  if (f.l4) line.push({ t: "  L1 sends to the fallback", s: "dim" });
  return line;
}

function standbyLine(v: FleetView): Line {
  const label = { t: pad("standby", 9), s: "bold" } as Seg;
  const s = v.standby;
  if (!s) return [label, { t: "none configured", s: "dim" }];
  return [
    label,
    { t: s.az, s: "cyan" },
    { t: s.wake ? "  WAKE" : "  asleep (on schedule)", s: s.wake ? "yellow" : "green" },
    { t: `  ${s.reason}` },
    ...(s.unavailable ? [{ t: `  CAPACITY UNAVAILABLE: ${s.unavailable}`, s: "red" } as Seg] : []),
    ...(s.backoff ? [{ t: `  WAKE HELD: ${s.backoff}`, s: "red" } as Seg] : []),
    { t: `  (refreshed ${formatAge(s.ageMs)})`, s: "dim" },
  ];
}

const PHASE_STYLE: Record<string, Style> = { serving: "green", waiting: "yellow", fallback: "yellow", unavailable: "red" };

/** The followed wake: which step of the fallback order is in charge, and why. */
function wakeLine(v: FleetView): Line[] {
  const w = v.actuation?.wake;
  if (!w) return [];
  const line: Line = [{ t: pad("wake", 9), s: "bold" }, { t: w.phase, s: PHASE_STYLE[w.phase] }, { t: `  step ${w.step} ${w.groups}` }];
  if (w.servedMs !== null) line.push({ t: `  first standby node serving ${(w.servedMs / 1000).toFixed(1)} s after the decision`, s: "dim" });
  if (w.failure) line.push({ t: `  ${w.failure}`, s: w.phase === "unavailable" ? "red" : "dim" });
  return [line];
}

/** The last practice wake: when, outcome, wake time. */
function practiceLine(v: FleetView, now: number): Line[] {
  const p = v.practice;
  if (!p) return [];
  const line: Line = [{ t: pad("practice", 9), s: "bold" }];
  if (p.requestedAt !== null) line.push({ t: `requested ${formatAge(now - p.requestedAt)}, pending: the leader acts on its next period`, s: "cyan" });
  if (p.runningSince !== null) line.push({ t: `${line.length > 1 ? "  " : ""}running, started ${formatAge(now - p.runningSince)}`, s: "yellow" });
  if (p.outcome) {
    line.push(
      { t: `${line.length > 1 ? "  last " : "last "}${p.at === null ? "?" : new Date(p.at).toISOString().slice(0, 16)}Z ` },
      { t: p.outcome, s: p.outcome === "served" ? "green" : p.outcome === "failed" ? "red" : "yellow" },
      { t: p.wakeMs !== null ? `  wake ${(p.wakeMs / 1000).toFixed(1)} s` : `  ${p.reason}`, s: p.outcome === "failed" ? "red" : "dim" },
    );
  } else if (line.length === 1) line.push({ t: "none yet", s: "dim" });
  return [line];
}

const OUTCOME_STYLE: Record<string, Style> = { applied: "green", already: "green", "dry-run": "cyan", "refused-stale": "red", failed: "red" };

/** What the leader last asked of the cloud: one line per slot that has acted. */
function actionLines(v: FleetView): Line[] {
  const label = { t: pad("actions", 9), s: "bold" } as Seg;
  const a = v.actuation;
  if (!a) return [[label, { t: "none yet", s: "dim" }]];
  const lines: Line[] = [];
  for (const x of [a.standby, a.shift]) {
    if (!x) continue;
    const line: Line = [
      lines.length ? { t: pad("", 9) } : label,
      { t: `${a.actuator} ` , s: "dim" },
      { t: `${x.action} ${x.az}` },
      { t: `  ${x.outcome}`, s: OUTCOME_STYLE[x.outcome] },
      { t: `  ${formatAge(x.ageMs)}`, s: "dim" },
    ];
    if (x.outcome === "failed" || x.outcome === "refused-stale") line.push({ t: `  ${x.detail}`, s: "red" });
    else if (x.detail) line.push({ t: `  ${x.detail}`, s: "dim" });
    lines.push(line);
  }
  return lines.length ? lines : [[label, { t: "none yet", s: "dim" }]];
}

function suspectLine(v: FleetView): Line {
  const label = { t: pad("suspect", 9), s: "bold" } as Seg;
  const s = v.suspect;
  if (!s || s.codes.length === 0) return [label, { t: "none", s: "dim" }];
  const shown = s.codes.map((c) => (s.counts[c] !== undefined ? `${c} (${s.counts[c]} nodes)` : c)).join(", ");
  return [label, { t: shown, s: "yellow" }, { t: "  blast-radius cap: nodes failing only these stay in", s: "dim" }];
}

/** Node identities: shown only when the leader publishes record digests; records under keys it does not read, in red. */
function identityLine(v: FleetView): Line[] {
  const i = v.identities;
  if (!i) return [];
  const label = { t: pad("identity", 9), s: "bold" } as Seg;
  const line: Line = [label, { t: `${i.enrolled} node${i.enrolled === 1 ? "" : "s"} under their own record key` }];
  if (i.unboundRecords === 0) return [[...line, { t: "  no other record", s: "dim" }]];
  line.push({ t: `  ${i.unboundRecords} record${i.unboundRecords === 1 ? "" : "s"} under keys the leader does not read (forged, or stale)`, s: "red" });
  line.push({ t: `: ${i.unboundNodes.join(", ")}${i.unboundNodes.length >= 20 ? ", …" : ""}`, s: "yellow" });
  return [line];
}

/** The leader's inventory: shown only when it reads one; `members` entries it does not list, in red. */
function inventoryLine(v: FleetView): Line[] {
  const i = v.inventory;
  if (!i) return [];
  const line: Line = [{ t: pad("nodes", 9), s: "bold" }, { t: `${i.nodes} listed by the leader's inventory (the nodes shown)` }];
  if (i.notListed === 0) return [[...line, { t: "  no other member", s: "dim" }]];
  line.push({ t: `  ${i.notListed} member${i.notListed === 1 ? "" : "s"} it does not list (forged, or nodes gone), not shown`, s: "red" });
  line.push({ t: `: ${i.notListedNodes.join(", ")}${i.notListed > i.notListedNodes.length ? ", …" : ""}`, s: "yellow" });
  return [line];
}

/**
 * Same model everywhere: the fleet's majority model, or first what differs — the
 * count and the AZs serving none of it (what a long line must not lose), then the majority
 * and the odd nodes.
 */
function modelLine(v: FleetView): Line {
  const label = { t: pad("model", 9), s: "bold" } as Seg;
  const m = v.models;
  if (!m) return [label, { t: "not published yet", s: "dim" }];
  const refreshed: Seg = { t: `  (refreshed ${formatAge(m.ageMs)})`, s: "dim" };
  const stale: Seg[] = m.stale ? [{ t: "  stale: no leader refreshed it", s: "yellow" }] : [];
  if (m.majority === null) return [label, { t: "no node serves a model yet", s: "dim" }, ...stale, refreshed];
  if (m.outlierCount === 0) return [label, { t: m.majority, s: "cyan" }, { t: `  all ${m.agreeing ?? "?"} serving nodes`, s: "green" }, ...stale, refreshed];
  const line: Line = [label, { t: `${m.outlierCount} node${m.outlierCount === 1 ? "" : "s"} differ${m.outlierCount === 1 ? "s" : ""}`, s: "yellow" }];
  if (m.outlierAzs.length) line.push({ t: `, ${m.outlierAzs.length === 1 ? "AZ" : "AZs"} ${m.outlierAzs.join(", ")} serve${m.outlierAzs.length === 1 ? "s" : ""} none of it`, s: "red" });
  line.push(...stale, { t: "  majority " }, { t: m.majority, s: "cyan" }, { t: ` (${m.agreeing ?? "?"} nodes)` });
  if (m.outliers.length) {
    const shown = m.outliers.map((o) => `${o.nodeId} ${o.model}${o.differs.length && !o.differs.includes("id") ? ` (${o.differs.join("+")})` : ""}`);
    line.push({ t: `: ${shown.join(", ")}${m.outlierCount > m.outliers.length ? ", …" : ""}`, s: "yellow" });
  }
  line.push(refreshed);
  return line;
}

/**
 * The repair ladder's plan: a summary line, then each advised action per node and each held
 * node with the reason a bound holds it, and the quarantined hosts. `advise` mode: nothing is done.
 */
function repairLines(v: FleetView): Line[] {
  const label = { t: pad("repairs", 9), s: "bold" } as Seg;
  const r = v.repairs;
  if (r === undefined) return [];
  if (r === null) return [[label, { t: "no plan published (LLMHA_REPAIR_MODE off, or no leader yet)", s: "dim" }]];
  const head: Line = [label, { t: r.mode === "advise" ? "advise: nothing is done" : r.mode === "act" ? "act: the plan is carried out" : r.mode, s: "cyan" }];
  if (!r.advised.length && !r.held.length) head.push({ t: "  no GPU node needs a repair", s: "green" });
  else head.push({ t: `  ${r.advised.length} advised`, s: r.advised.length ? "yellow" : undefined }, { t: `, ${r.held.length} held`, s: r.held.length ? "red" : undefined });
  if (r.quarantined.length) head.push({ t: `, quarantined hosts ${r.quarantined.join(", ")}`, s: "red" });
  if (r.stale) head.push({ t: "  stale: no leader refreshed it", s: "yellow" });
  head.push({ t: `  (refreshed ${formatAge(r.ageMs)})`, s: "dim" });
  const row = (x: (typeof r.advised)[number], held: boolean): Line => [
    { t: `  ${x.nodeId} (${x.az}${x.host !== x.nodeId ? `, ${x.host}` : ""})  ` },
    held ? { t: `held, needs ${x.wanted ?? "?"}`, s: "red" } : { t: x.action, s: "yellow" },
    { t: `  ${x.reason}` },
    { t: `  since ${formatAge(x.ageMs)}`, s: "dim" },
    ...(x.step ? [{ t: `  step ${x.step.name} since ${formatAge(x.step.ageMs)}: ${x.step.detail}`, s: x.step.name.startsWith("failed") ? "red" : "cyan" } as Seg] : []),
  ];
  return [head, ...r.advised.map((x) => row(x, false)), ...r.held.map((x) => row(x, true))];
}

function azHeader(a: AzRow, now: number): Line {
  const line: Line = [{ t: a.az, s: "bold" }];
  if (a.standby) line.push({ t: " (standby)", s: "dim" });
  const p = a.published;
  if (!p) {
    line.push({ t: a.nodes.length ? "  state not published (no leader yet)" : "  no nodes (scaled to zero)", s: "dim" });
    return line;
  }
  line.push(
    { t: `  ${p.state}`, s: styleOf(p.state) },
    { t: `  ${p.healthyCapacity}/${p.totalCapacity} GPUs healthy  ${p.nodesIn}/${p.nodes} nodes in` },
    { t: `  since ${formatAge(p.since === null ? null : now - p.since)}`, s: "dim" },
  );
  if (p.stale) line.push({ t: `  stale: published ${formatAge(p.ageMs)}`, s: "yellow" });
  return line;
}

function nodeLine(n: NodeRow, idW: number, suspect: ReadonlySet<string>): Line {
  const dead = !n.alive;
  const line: Line = [
    { t: "  " + pad(n.id, idW) + "  " },
    { t: pad(n.status, 11), s: styleOf(n.status) },
    { t: "  " + padL(dead ? "-" : String(n.weight), 6) },
    { t: "  " + padL(n.loadScore === null ? "-" : n.loadScore.toFixed(2), 6) },
    { t: "  " + padL(`${dead ? "-" : n.gpus}/${n.gpusExpected}`, 5), s: !dead && n.gpus < n.gpusExpected ? "red" : undefined },
    { t: "  " + padL(formatAge(n.heartbeatAgeMs), 9), s: dead ? "red" : "dim" },
    { t: "  " },
  ];
  if (n.hard.length) line.push({ t: `hard ${n.hard.join(",")} `, s: "red" });
  if (n.soft.length) {
    const sus = n.soft.filter((c) => suspect.has(c));
    const own = n.soft.filter((c) => !suspect.has(c));
    if (own.length) line.push({ t: `soft ${own.join(",")} `, s: "yellow" });
    if (sus.length) line.push({ t: `suspect ${sus.join(",")} `, s: "dim" });
  }
  if (n.phase === "warmup" || n.phase === "loading" || n.phase === "draining") line.push({ t: n.phase, s: "cyan" });
  if (dead) line.push({ t: "no heartbeat; capacity still counted", s: "dim" });
  return line;
}

/**
 * Which nodes the AZ tables list: `all`; `attention`, only those a reader has to look at (the
 * others counted on one line); `auto` (the default), every node when the AZs shown hold up to
 * `AUTO_LIST_ALL` nodes and `attention` above it, where a table of every node would bury the few
 * that matter and a watch could not redraw it on one screen.
 */
export type NodeListing = "all" | "attention" | "auto";
export const NODE_LISTINGS: readonly NodeListing[] = ["all", "attention", "auto"];
export const AUTO_LIST_ALL = 40;

export interface FleetRenderOptions extends RenderOptions {
  /** Default `auto`. */
  nodes?: NodeListing;
  /** Only this AZ's table (the fleet's lines above the tables stay). Default every AZ. */
  az?: string | null;
}

/**
 * Whether a node needs a look: not HEALTHY, not serving (warming up, loading, draining, down),
 * a hard reason or a soft one of its own (a code the leader holds as suspect fleet-wide is not
 * the node's), fewer GPUs than expected, or no heartbeat.
 */
export function needsAttention(n: NodeRow, suspect: ReadonlySet<string>): boolean {
  if (n.status !== "HEALTHY" || !n.alive || n.phase !== "serving" || n.hard.length > 0 || n.gpus < n.gpusExpected) return true;
  return n.soft.some((c) => !suspect.has(c));
}

/** Why `--az` shows nothing (the cluster has no such AZ, naming those it has), or null. */
export function missingAz(v: FleetView, az: string | null | undefined): string | null {
  if (!az || v.azs.some((a) => a.az === az)) return null;
  return `no AZ ${az} in cluster ${v.cluster} (AZs: ${v.azs.map((a) => a.az).join(", ") || "none"})`;
}

/** The whole view as lines (no trailing newline). */
export function renderFleetView(v: FleetView, o: FleetRenderOptions = {}): string[] {
  const width = o.width ?? STATUS_WIDTH;
  const color = o.color ?? false;
  const lines: Line[] = [];
  const stamp = new Date(v.now).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  lines.push([{ t: "llm-ha status", s: "bold" }, { t: `  cluster ${v.cluster}` }, { t: `  ${v.redis}  ${stamp}`, s: "dim" }]);
  lines.push([]);
  lines.push(leaderLine(v), tierLine(v), l4Line(v), standbyLine(v), ...actionLines(v), ...wakeLine(v), ...practiceLine(v, v.now), suspectLine(v), modelLine(v), ...rolloutSection(v.rollout, v.now), ...repairLines(v), ...inventoryLine(v), ...identityLine(v));

  const suspect = new Set(v.suspect?.codes ?? []);
  const azs = o.az ? v.azs.filter((a) => a.az === o.az) : v.azs;
  // `auto` counts the nodes of the AZs shown: one small AZ of a large fleet is listed whole.
  const total = azs.reduce((sum, a) => sum + a.nodes.length, 0);
  const listing = o.nodes ?? "auto";
  const every = listing === "all" || (listing === "auto" && total <= AUTO_LIST_ALL);
  const missing = missingAz(v, o.az);
  if (missing) lines.push([], [{ t: missing, s: "red" }]);
  const listed = azs.map((a) => (every ? a.nodes : a.nodes.filter((n) => needsAttention(n, suspect))));
  const idW = Math.min(24, Math.max(4, ...listed.flat().map((n) => [...n.id].length)));
  azs.forEach((a, i) => {
    lines.push([], azHeader(a, v.now));
    if (!a.nodes.length) return;
    if (listed[i].length) {
      lines.push([
        { t: "  " + pad("NODE", idW) + "  " + pad("STATUS", 11) + "  " + padL("WEIGHT", 6) + "  " + padL("LOAD", 6) + "  " + padL("GPUS", 5) + "  " + padL("HEARTBEAT", 9) + "  REASONS", s: "dim" },
      ]);
      for (const n of listed[i]) lines.push(nodeLine(n, idW, suspect));
    }
    const rest = a.nodes.length - listed[i].length;
    if (rest > 0) {
      const more = listed[i].length ? "more " : "";
      lines.push([{ t: `  ${rest} ${more}node${rest === 1 ? "" : "s"} HEALTHY and serving, not listed`, s: "green" }, { t: "  (--nodes all lists them)", s: "dim" }]);
    }
  });

  lines.push([], [{ t: `events`, s: "bold" }, { t: `  last ${v.events.length}, newest first; tokens shown when not the current leader's`, s: "dim" }]);
  if (!v.events.length) lines.push([{ t: "  none", s: "dim" }]);
  for (const e of v.events) {
    // The current term's token is on the leader line; an event from another term says which.
    const term = e.token !== null && e.token !== v.leader.token ? `  token ${e.token}` : "";
    lines.push([{ t: "  " + padL(formatAge(e.ageMs), 8) + "  ", s: "dim" }, { t: e.summary, s: TONE_STYLE[e.tone] }, { t: term, s: "dim" }]);
  }
  return lines.map((l) => fit(l, width).map((s) => paint(s, color)).join(""));
}

/** A one-line banner (Redis unreachable under `--watch`). */
export function renderBanner(text: string, o: RenderOptions = {}): string {
  const width = o.width ?? STATUS_WIDTH;
  return fit([{ t: ` ${text} `, s: "red+inverse" }], width).map((s) => paint(s, o.color ?? false)).join("");
}

/** Removes ANSI SGR sequences (tests, widths). */
export function stripAnsi(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\x1b\[[0-9;]*m/g, "");
}
