/**
 * The pure parts of the fleet-scale bench (`lab/bench/scale.ts`): when the registry first held
 * enough unhealthy reports for the leader to call an AZ DOWN, the growth of each figure with
 * the node count (log-log slope), the figures against their targets, the readable table and
 * the plot. No I/O here, so a unit test holds them (test/bench/scale-table.test.ts).
 */
import { escapeXml } from "../drill/svg";

/**
 * The moment the registry first showed an AZ of `n` equal nodes below the DOWN threshold:
 * the ack time of the unhealthy report that left fewer than `downBelow × n` healthy (the
 * controller's rule, state.ts: DOWN when healthy / total < downBelow). Null when too few
 * reports landed.
 */
export function downCrossingAt(ackTimes: readonly number[], n: number, downBelow: number): number | null {
  const need = Math.floor(n * (1 - downBelow)) + 1;
  if (need < 1 || ackTimes.length < need) return null;
  return [...ackTimes].sort((a, b) => a - b)[need - 1];
}

/** A figure as measured at one fleet size. */
export interface ScaleRow {
  nodes: number;
  /** Leader's decision: the registry below the DOWN threshold → the DOWN state published (ms), over the faults. */
  decisionP50Ms: number;
  decisionMaxMs: number;
  /** From the fault injected (agents' reports still to come, at their next heartbeat) → DOWN published. */
  faultToDownMaxMs: number;
  /** An AZ falls silent (heartbeats stop) → DOWN published: its hashes' TTL (3 s) plus a period at most. Absent: not run. */
  silentToDownMs?: number;
  redisCpuPercent: number;
  redisOpsPerSec: number;
  leaseRenewals: number;
  leaseMissed: number;
  /** The leader's read of every record plus its evaluation, per period (ms). */
  registryReadP99Ms: number;
  azHealthP99Ms: number;
  heartbeatP99Ms: number;
  /** An operator's `llm-ha status`: the whole view read from Redis as `llmha-reader` (ms, p99 of its reads). Absent: not run. */
  statusReadP99Ms?: number;
  /** Lines of its default text view (nodes listed only when they need a look, above `AUTO_LIST_ALL`). Absent: not run. */
  statusLines?: number;
}

/** The figures of a row the table shows, each with its unit and, where it has one, its target (at most). */
export const FIGURES: readonly { key: keyof ScaleRow; label: string; unit: string; target: number | null }[] = [
  { key: "decisionMaxMs", label: "AZ decision max", unit: "ms", target: 1000 },
  { key: "decisionP50Ms", label: "AZ decision p50", unit: "ms", target: null },
  { key: "faultToDownMaxMs", label: "fault → DOWN max", unit: "ms", target: null },
  { key: "silentToDownMs", label: "silent AZ → DOWN", unit: "ms", target: 4000 },
  { key: "redisCpuPercent", label: "Redis CPU", unit: "% core", target: 30 },
  { key: "redisOpsPerSec", label: "Redis ops/s", unit: "/s", target: null },
  { key: "leaseRenewals", label: "lease renewals", unit: "", target: null },
  { key: "leaseMissed", label: "renewals missed", unit: "", target: 0 },
  { key: "registryReadP99Ms", label: "registry read p99", unit: "ms", target: 100 },
  { key: "azHealthP99Ms", label: "/az/health p99", unit: "ms", target: 300 },
  { key: "heartbeatP99Ms", label: "heartbeat p99", unit: "ms", target: null },
  { key: "statusReadP99Ms", label: "llm-ha status read p99", unit: "ms", target: 1000 },
  { key: "statusLines", label: "llm-ha status lines", unit: "", target: null },
];

/**
 * How a figure grows with the node count: the least-squares slope of log(y) on log(n) (1 =
 * linear, 2 = quadratic). Null with fewer than two usable points (y ≤ 0 has no log).
 */
export function growthExponent(points: readonly { n: number; y: number }[]): number | null {
  const p = points.filter((x) => x.n > 0 && x.y > 0 && Number.isFinite(x.y));
  if (p.length < 2) return null;
  const xs = p.map((x) => Math.log(x.n));
  const ys = p.map((x) => Math.log(x.y));
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? null : Math.round((num / den) * 100) / 100;
}

export interface GrowthEntry {
  figure: string;
  unit: string;
  target: number | null;
  values: { nodes: number; value: number; withinTarget: boolean | null }[];
  /** Log-log slope over the sizes; above `SUPERLINEAR` it grows faster than linearly. */
  exponent: number | null;
  superlinear: boolean;
}

/** A slope above this counts as faster than linear (noise on a shared 2-core machine gives ±0.2). */
export const SUPERLINEAR = 1.25;

/** Figures that grow with the fleet by nature; the others (decision, renewals) are bounded by periods, not by nodes. */
const SCALED: ReadonlySet<keyof ScaleRow> = new Set(["redisCpuPercent", "redisOpsPerSec", "registryReadP99Ms"]);

export function growthTable(rows: readonly ScaleRow[]): GrowthEntry[] {
  const sorted = [...rows].sort((a, b) => a.nodes - b.nodes);
  return FIGURES.filter((f) => sorted.some((r) => r[f.key] !== undefined)).map((f) => {
    const values = sorted.filter((r) => r[f.key] !== undefined).map((r) => {
      const value = r[f.key] as number;
      return { nodes: r.nodes, value, withinTarget: f.target === null ? null : value <= f.target };
    });
    const exponent = growthExponent(values.map((v) => ({ n: v.nodes, y: v.value })));
    return { figure: f.label, unit: f.unit, target: f.target, values, exponent, superlinear: SCALED.has(f.key) && exponent !== null && exponent > SUPERLINEAR };
  });
}

/** Every target met at every size (figures without a target do not count). */
export function withinTargets(table: readonly GrowthEntry[]): boolean {
  return table.every((e) => e.values.every((v) => v.withinTarget !== false));
}

const fmt = (x: number): string => (Number.isInteger(x) ? x.toLocaleString("en-US") : x >= 100 ? Math.round(x).toLocaleString("en-US") : String(Math.round(x * 10) / 10));

/** The readable table (stderr): one line per figure, its value at each size, its target and its growth. */
export function renderGrowthTable(table: readonly GrowthEntry[]): string {
  const sizes = [...new Set(table.flatMap((e) => e.values.map((v) => v.nodes)))].sort((a, b) => a - b);
  const head = ["figure", ...sizes.map((n) => `${fmt(n)} nodes`), "target", "growth"];
  const cell = (e: GrowthEntry, n: number): string => {
    const v = e.values.find((x) => x.nodes === n);
    return v ? `${fmt(v.value)}${v.withinTarget === false ? " MISS" : ""}` : "-";
  };
  const lines = table.map((e) => [
    `${e.figure}${e.unit ? ` (${e.unit})` : ""}`,
    ...sizes.map((n) => cell(e, n)),
    e.target === null ? "-" : `≤ ${fmt(e.target)}`,
    e.exponent === null ? "-" : `n^${e.exponent}${e.superlinear ? " SUPERLINEAR" : ""}`,
  ]);
  const all = [head, ...lines];
  const widths = head.map((_, i) => Math.max(...all.map((l) => l[i].length)));
  return all.map((l) => l.map((c, i) => c.padEnd(widths[i])).join("  ")).join("\n") + "\n";
}

/**
 * The plot for docs/bench.md: one small panel per figure, its value against the node count
 * (log-scaled x), the target as a dashed line where there is one.
 */
export function renderScaleSvg(table: readonly GrowthEntry[], title: string): string {
  const panels = table.filter((e) => e.values.length > 0);
  const cols = 3;
  const pw = 300;
  const ph = 190;
  const rows = Math.ceil(panels.length / cols);
  const W = cols * pw;
  const H = rows * ph + 40;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="10" y="22" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
  ];
  panels.forEach((e, i) => {
    const ox = (i % cols) * pw + 45;
    const oy = Math.floor(i / cols) * ph + 50;
    const w = pw - 65;
    const h = ph - 65;
    const ns = e.values.map((v) => v.nodes);
    const lo = Math.log(Math.min(...ns));
    const hi = Math.log(Math.max(...ns));
    const ymax = Math.max(...e.values.map((v) => v.value), e.target ?? 0, 1e-9) * 1.15;
    const X = (n: number): number => ox + (hi === lo ? w / 2 : ((Math.log(n) - lo) / (hi - lo)) * w);
    const Y = (y: number): number => oy + h - (y / ymax) * h;
    out.push(`<text x="${ox}" y="${oy - 8}" font-weight="bold">${escapeXml(`${e.figure}${e.unit ? ` (${e.unit})` : ""}`)}${e.exponent !== null ? escapeXml(`  n^${e.exponent}`) : ""}</text>`);
    out.push(`<line x1="${ox}" y1="${oy + h}" x2="${ox + w}" y2="${oy + h}" stroke="#444"/><line x1="${ox}" y1="${oy}" x2="${ox}" y2="${oy + h}" stroke="#444"/>`);
    out.push(`<text x="${ox - 4}" y="${oy + 4}" text-anchor="end">${escapeXml(fmt(ymax))}</text><text x="${ox - 4}" y="${oy + h}" text-anchor="end">0</text>`);
    for (const n of ns) out.push(`<text x="${X(n)}" y="${oy + h + 14}" text-anchor="middle">${escapeXml(fmt(n))}</text>`);
    if (e.target !== null && e.target > 0) out.push(`<line x1="${ox}" y1="${Y(e.target)}" x2="${ox + w}" y2="${Y(e.target)}" stroke="#c0392b" stroke-dasharray="4 3"/><text x="${ox + w}" y="${Y(e.target) - 3}" text-anchor="end" fill="#c0392b">target ${escapeXml(fmt(e.target))}</text>`);
    out.push(`<polyline fill="none" stroke="#2471a3" stroke-width="2" points="${e.values.map((v) => `${X(v.nodes).toFixed(1)},${Y(v.value).toFixed(1)}`).join(" ")}"/>`);
    for (const v of e.values) out.push(`<circle cx="${X(v.nodes).toFixed(1)}" cy="${Y(v.value).toFixed(1)}" r="3" fill="${v.withinTarget === false ? "#c0392b" : "#2471a3"}"><title>${escapeXml(`${fmt(v.nodes)} nodes: ${fmt(v.value)}`)}</title></circle>`);
  });
  out.push(`<text x="10" y="${H - 6}" fill="#666">x: nodes (log scale); dashed: the target</text>`);
  out.push("</svg>");
  return out.join("\n") + "\n";
}
