/**
 * The pieces every status view's lines are made of (the fleet view, the rollout section, `llm-ha
 * rollout status`): coloured segments, a line cut to a width, ages. Pure.
 */
/** SGR codes used by the view (the SVG picture maps the same codes). */
export const SGR = { bold: "1", dim: "2", red: "31", green: "32", yellow: "33", cyan: "36", inverse: "7" } as const;
export type Style = keyof typeof SGR | `${keyof typeof SGR}+${keyof typeof SGR}`;

export interface Seg {
  t: string;
  s?: Style;
}
export type Line = Seg[];

/** Colour of a status word: node status, AZ state or tier level. */
export function styleOf(word: string): Style | undefined {
  if (["HEALTHY", "OK", "L0"].includes(word)) return "green";
  if (["DEGRADED", "UNKNOWN", "L1", "L2"].includes(word)) return "yellow";
  if (["UNHEALTHY", "UNREACHABLE", "EXPIRED", "DOWN", "L3", "L4"].includes(word)) return "red";
  return undefined;
}

/** "0s ago", "42s ago", "3m ago", "5h ago", "2d ago". */
export function formatAge(ms: number | null): string {
  if (ms === null) return "-";
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.floor(s / 60)}m ago`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

export function paint(seg: Seg, color: boolean): string {
  if (!color || !seg.s || seg.t === "") return seg.t;
  const codes = seg.s.split("+").map((k) => SGR[k as keyof typeof SGR]).join(";");
  return `\x1b[${codes}m${seg.t}\x1b[0m`;
}

/** Cuts a line to `width` visible characters, ending in "…" when cut. */
export function fit(line: Line, width: number): Line {
  const out: Line = [];
  let used = 0;
  for (const seg of line) {
    const chars = [...seg.t];
    if (used + chars.length <= width) {
      out.push(seg);
      used += chars.length;
      continue;
    }
    if (used >= width && out.length) {
      // The line is exactly full: its last character gives way to "…" (not one column more).
      const last = out[out.length - 1];
      out[out.length - 1] = { ...last, t: [...last.t].slice(0, -1).join("") + "…" };
    } else out.push({ t: chars.slice(0, Math.max(0, width - used - 1)).join("") + "…", s: seg.s });
    break;
  }
  // no trailing blanks: a redraw in place overwrites with \x1b[K anyway
  while (out.length && out[out.length - 1].t.trim() === "") out.pop();
  const last = out[out.length - 1];
  if (last) out[out.length - 1] = { ...last, t: last.t.replace(/\s+$/, "") };
  return out;
}

export const pad = (s: string, n: number): string => s + " ".repeat(Math.max(0, n - [...s].length));
export const padL = (s: string, n: number): string => " ".repeat(Math.max(0, n - [...s].length)) + s;

export interface RenderOptions {
  /** ANSI colours. Default false. */
  color?: boolean;
  /** Columns. Default 100. */
  width?: number;
}

/** Lines as text: each cut to `width` (100 by default), coloured when asked. */
export function toText(lines: Line[], o: RenderOptions = {}): string[] {
  const width = o.width ?? 100;
  return lines.map((l) => fit(l, width).map((s) => paint(s, o.color ?? false)).join(""));
}
