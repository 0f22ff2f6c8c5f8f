/**
 * The timeline picture, written by hand as SVG: one lane per node (its agent's status),
 * one per node in L1 (its row in its AZ's HAProxy), one per AZ (in the DNS answer, and
 * its published state), the tier, and failed client requests per second; fault marks as
 * vertical lines. Pure: timeline in, text out.
 */
import type { Timeline } from "./timeline";

export const STATUS_COLORS: Readonly<Record<string, string>> = Object.freeze({
  HEALTHY: "#2e9e44",
  DEGRADED: "#e0b020",
  UNHEALTHY: "#d03030",
  UNREACHABLE: "#801818",
  UNKNOWN: "#999999",
  LOADING: "#4080d0",
  ERR: "#222222",
  UP: "#2e9e44",
  WARM: "#8fd08f",
  DOWN: "#d03030",
  DRAIN: "#e08020",
  GONE: "#222222",
  IN: "#2e9e44",
  OUT: "#d03030",
  OK: "#2e9e44",
  NONE: "#eeeeee",
  L0: "#2e9e44",
  L1: "#9fd05f",
  L2: "#e0b020",
  L3: "#e08020",
  L4: "#d03030",
  // The standby AZ scaled to zero by design: nothing to see, nothing wrong.
  ASLEEP: "#c8c8c8",
});

/** Runs of equal values: `[start, end, value]`, end = the next sample's time. */
export function runsOf<T>(points: readonly { t: number; v: T }[], endT: number): { from: number; to: number; v: T }[] {
  const out: { from: number; to: number; v: T }[] = [];
  for (let i = 0; i < points.length; i++) {
    const p = points[i];
    const to = i + 1 < points.length ? points[i + 1].t : endT;
    const last = out[out.length - 1];
    if (last && last.v === p.v) last.to = to;
    else out.push({ from: p.t, to, v: p.v });
  }
  return out;
}

export function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function l1Word(status: string | undefined, weight: number | undefined): string {
  if (status === undefined) return "GONE";
  if (/^(DOWN|MAINT|NOLB)/.test(status) || weight === 0) return "DOWN";
  if (status.startsWith("DRAIN")) return "DRAIN";
  if (status === "UP" && (weight ?? 0) < 100) return "WARM";
  return "UP";
}

export interface SvgOptions {
  title: string;
  /** node id → AZ, in display order. */
  nodes: { id: string; az: string; proxy: string }[];
  azs: { name: string; address: string; standby: boolean }[];
  /** Only this stretch of the run (ms since the drill started; one scenario's panel). Default the whole run. */
  window?: { from: number; to: number };
  /** Targets drawn as vertical lines: where a figure had to be by (`ok` false: it was not). */
  targets?: { t: number; label: string; ok: boolean }[];
}

export function renderTimelineSvg(whole: Timeline, o: SvgOptions): string {
  const from = o.window?.from ?? 0;
  const tl = o.window ? windowOf(whole, o.window.from, o.window.to) : whole;
  const endT = o.window?.to ?? Math.max(1, tl.samples[tl.samples.length - 1]?.t ?? 1, tl.fleet[tl.fleet.length - 1]?.t ?? 1);
  const left = 190;
  const width = 1400;
  const plotW = width - left - 20;
  const laneH = 14;
  const gap = 4;
  const x = (t: number): number => left + ((t - from) / Math.max(1, endT - from)) * plotW;
  const asleep = new Set(o.azs.filter((a) => a.standby).map((a) => a.name));
  /** The leader's last word before `t` on the standby; asked in time order, so one pass over the fleet samples. */
  let fi = -1;
  const wantedAwake = (t: number): boolean => {
    if (fi >= 0 && tl.fleet[fi].t > t) fi = -1;
    while (fi + 1 < tl.fleet.length && tl.fleet[fi + 1].t <= t) fi++;
    return fi >= 0 && tl.fleet[fi].standbyWake;
  };
  const parts: string[] = [];
  let y = 52;
  const lane = (label: string, runs: { from: number; to: number; v: string }[]): void => {
    parts.push(`<text x="${left - 6}" y="${y + laneH - 3}" text-anchor="end">${escapeXml(label)}</text>`);
    for (const r of runs) {
      const w = Math.max(0.5, x(r.to) - x(r.from));
      parts.push(`<rect x="${x(r.from).toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${laneH}" fill="${STATUS_COLORS[r.v] ?? "#bbbbbb"}"><title>${escapeXml(`${label}: ${r.v} ${(r.from / 1000).toFixed(2)}–${(r.to / 1000).toFixed(2)} s`)}</title></rect>`);
    }
    y += laneH + gap;
  };
  const section = (name: string): void => {
    y += 6;
    parts.push(`<text x="8" y="${y + 10}" font-weight="bold">${escapeXml(name)}</text>`);
    y += 16;
  };
  section("agent status (/readyz)");
  // A standby node with no agent answering is asleep (scaled to zero), not in error.
  const agentWord = (n: { id: string; az: string }, st: string | undefined): string => ((st ?? "ERR") === "ERR" && asleep.has(n.az) ? "ASLEEP" : (st ?? "ERR"));
  for (const n of o.nodes) lane(`${n.id} (${n.az})`, runsOf(tl.samples.map((s) => ({ t: s.t, v: agentWord(n, s.nodes[n.id]?.status) })), endT));
  section("L1: row in its AZ's HAProxy");
  for (const n of o.nodes) {
    const word = (s: (typeof tl.samples)[number]): string => {
      const w = l1Word(s.l1[`${n.proxy}/${n.id}`]?.status, s.l1[`${n.proxy}/${n.id}`]?.weight);
      return w !== "UP" && w !== "WARM" && agentWord(n, s.nodes[n.id]?.status) === "ASLEEP" ? "ASLEEP" : w;
    };
    lane(n.id, runsOf(tl.samples.map((s) => ({ t: s.t, v: word(s) })), endT));
  }
  section("AZs: in the DNS answer / published state");
  for (const az of o.azs) {
    // Out of DNS is the standby's rest state: grey unless the leader wants it awake.
    const out = (t: number): string => (az.standby && !wantedAwake(t) ? "ASLEEP" : "OUT");
    lane(`${az.name} DNS${az.standby ? " (standby)" : ""}`, runsOf(tl.samples.filter((s) => s.dns !== null).map((s) => ({ t: s.t, v: s.dns!.includes(az.address) ? "IN" : out(s.t) })), endT));
    lane(`${az.name} state`, runsOf(tl.fleet.map((f) => ({ t: f.t, v: f.azState[az.name] ?? "NONE" })), endT));
  }
  section("tier");
  lane("tier level", runsOf(tl.fleet.map((f) => ({ t: f.t, v: f.tier ?? "NONE" })), endT));
  section("failed client requests per second");
  const buckets = new Map<string, number[]>();
  const whys = new Map<string, Map<string, number>[]>();
  const secs = Math.ceil((endT - from) / 1000);
  for (const f of tl.failures) {
    const i = Math.floor((f.t - from) / 1000);
    const b = buckets.get(f.client) ?? new Array<number>(secs + 1).fill(0);
    b[i]++;
    buckets.set(f.client, b);
    const w = whys.get(f.client) ?? [];
    w[i] ??= new Map();
    w[i].set(f.why, (w[i].get(f.why) ?? 0) + 1);
    whys.set(f.client, w);
  }
  const clients = Object.keys(tl.sent).sort();
  const barH = 30;
  for (const c of clients) {
    const b = buckets.get(c) ?? [];
    const peak = Math.max(1, ...b);
    parts.push(`<text x="${left - 6}" y="${y + barH - 3}" text-anchor="end">${escapeXml(`${c} (${tl.failures.filter((f) => f.client === c).length} of ${tl.sent[c]})`)}</text>`);
    parts.push(`<line x1="${left}" y1="${y + barH}" x2="${left + plotW}" y2="${y + barH}" stroke="#ccc"/>`);
    let lastWhy = "";
    b.forEach((n, i) => {
      if (!n) return;
      const h = (n / peak) * barH;
      const t0 = from + i * 1000;
      const reasons = [...(whys.get(c)?.[i] ?? new Map<string, number>())].sort((p, q) => q[1] - p[1]);
      const why = reasons.map(([r, k]) => `${k}× ${r}`).join("; ");
      parts.push(`<rect class="failure" x="${x(t0).toFixed(1)}" y="${(y + barH - h).toFixed(1)}" width="${Math.max(1, x(1000) - x(0) - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="#d03030"><title>${escapeXml(`${n} failed at ${(t0 / 1000).toFixed(0)}–${(t0 / 1000 + 1).toFixed(0)} s: ${why}`)}</title></rect>`);
      // The main reason written beside the mark, once per stretch of the same reason.
      const main = reasons[0]?.[0] ?? "";
      if (main && main !== lastWhy) parts.push(`<text class="reason" x="${(x(t0) + 2).toFixed(1)}" y="${(y + 9).toFixed(1)}" font-size="9" fill="#801818">${escapeXml(main.slice(0, 40))}</text>`);
      lastWhy = main;
    });
    y += barH + gap * 2;
  }
  const top = 30;
  const marks = tl.marks.map((m, i) => {
    const color = m.kind === "inject" ? "#d03030" : "#2e9e44";
    // Staggered so that labels of faults close in time do not overprint.
    const label = m.kind === "inject" ? `<text x="${(x(m.t) + 2).toFixed(1)}" y="${top + (i % 3) * 9}" font-size="9" fill="${color}">${escapeXml(m.label)}</text>` : "";
    return `<line x1="${x(m.t).toFixed(1)}" y1="${top}" x2="${x(m.t).toFixed(1)}" y2="${y}" stroke="${color}" stroke-dasharray="3,2"/>${label}`;
  });
  const targets = (o.targets ?? []).map((g, i) => {
    const color = g.ok ? "#2060c0" : "#d03030";
    return `<g class="target"><line x1="${x(g.t).toFixed(1)}" y1="${top}" x2="${x(g.t).toFixed(1)}" y2="${y}" stroke="${color}" stroke-width="1.5"/><text x="${(x(g.t) - 2).toFixed(1)}" y="${top + 30 + (i % 3) * 9}" text-anchor="end" font-size="9" fill="${color}">${escapeXml(g.label)}</text></g>`;
  });
  const axis: string[] = [];
  const span = endT - from;
  const step = span > 300_000 ? 60_000 : span > 60_000 ? 10_000 : span > 20_000 ? 5_000 : 1_000;
  for (let t = Math.ceil(from / step) * step; t <= endT; t += step) {
    axis.push(`<line x1="${x(t).toFixed(1)}" y1="${y}" x2="${x(t).toFixed(1)}" y2="${y + 4}" stroke="#333"/><text x="${x(t).toFixed(1)}" y="${y + 15}" text-anchor="middle">${t / 1000}s</text>`);
  }
  const legend = ["HEALTHY", "DEGRADED", "UNHEALTHY", "UNREACHABLE", "UNKNOWN", "ERR", "WARM", "DRAIN", "OUT", "ASLEEP"]
    .map((k, i) => `<rect class="legend" x="${left + i * 110}" y="${y + 24}" width="10" height="10" fill="${STATUS_COLORS[k]}"/><text x="${left + i * 110 + 14}" y="${y + 33}">${k}</text>`)
    .join("");
  const height = y + 50;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="8" y="18" font-size="14" font-weight="bold">${escapeXml(o.title)}</text>`,
    ...parts,
    ...marks,
    ...targets,
    ...axis,
    legend,
    "</svg>",
    "",
  ].join("\n");
}

/** The part of a timeline between two times (each lane starts with the state it had at \`from\`). */
export function windowOf(tl: Timeline, from: number, to: number): Timeline {
  const cut = <T extends { t: number }>(xs: readonly T[]): T[] => {
    const before = xs.filter((s) => s.t < from).at(-1);
    return [...(before ? [{ ...before, t: from }] : []), ...xs.filter((s) => s.t >= from && s.t <= to)];
  };
  return { samples: cut(tl.samples), fleet: cut(tl.fleet), failures: tl.failures.filter((f) => f.t >= from && f.t <= to), continued: tl.continued.filter((c) => c.t >= from && c.t <= to), sent: tl.sent, marks: tl.marks.filter((m) => m.t >= from && m.t <= to) };
}
