/**
 * Tables and text that fit the terminal, for every command that prints rows (status,
 * preflight, cost, the drill): `-o wide` gives every column at full length, the default
 * drops the columns marked `wide` and shortens the `shrink` ones with "…" until each line
 * fits. The width is `$COLUMNS`, else the terminal's; a pipe with neither gets full lines,
 * as scripts and `grep` want them.
 */

/** How a command prints: `text` fits the width, `wide` has every column, `json` is a document. */
export type OutputMode = "text" | "wide" | "json";

export class OutputFlagError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutputFlagError";
  }
}

/** `-o`/`--output` (and the older `--json`) as a mode; throws `OutputFlagError` on anything else. */
export function outputMode(output: string | undefined, json = false): OutputMode {
  if (output !== undefined && output !== "json" && output !== "text" && output !== "wide") throw new OutputFlagError(`-o/--output must be text, wide or json, got ${JSON.stringify(output)}`);
  return json ? "json" : ((output as OutputMode | undefined) ?? "text");
}

/** Columns to fit: `$COLUMNS` when it is a number, else the terminal's; Infinity for a pipe with neither. */
export function terminalColumns(env: NodeJS.ProcessEnv = process.env, out: { isTTY?: boolean; columns?: number } = process.stdout): number {
  const c = Number(env.COLUMNS);
  if (Number.isInteger(c) && c > 0) return c;
  if (out.isTTY && out.columns) return out.columns;
  return Infinity;
}

export interface Column {
  head: string;
  /** Numbers: padded on the left. */
  right?: boolean;
  /** Shown only with `-o wide`. */
  wide?: boolean;
  /** May be shortened (with "…") to make the row fit; the others never are. */
  shrink?: boolean;
}

/** Shortest a shrinking column gets. */
const MIN_SHRUNK = 8;
const GAP = "  ";

/** `s` cut to `n` characters, the last one "…" when cut. */
export function ellipsize(s: string, n: number): string {
  const chars = [...s];
  if (chars.length <= n) return s;
  return n <= 0 ? "" : chars.slice(0, n - 1).join("") + "…";
}

/**
 * Rows under a header line, two spaces apart. Without `wide`, `wide` columns are left out and
 * `shrink` columns (the last first) give up width until a line fits `width`; a line still too
 * long (no column can shrink) is cut.
 */
export function renderTable(columns: readonly Column[], rows: readonly (readonly string[])[], o: { width?: number; wide?: boolean } = {}): string[] {
  const keep = columns.map((c, i) => ({ c, i })).filter(({ c }) => o.wide || !c.wide);
  const all = [keep.map(({ c }) => c.head), ...rows.map((r) => keep.map(({ i }) => r[i] ?? ""))];
  const widths = keep.map((_, k) => Math.max(...all.map((r) => [...r[k]].length)));
  const width = o.wide ? Infinity : (o.width ?? Infinity);
  let excess = widths.reduce((a, b) => a + b, 0) + GAP.length * (widths.length - 1) - width;
  for (let k = keep.length - 1; k >= 0 && excess > 0; k--) {
    if (!keep[k].c.shrink) continue;
    const give = Math.min(excess, Math.max(0, widths[k] - MIN_SHRUNK));
    widths[k] -= give;
    excess -= give;
  }
  return all.map((r) => {
    const line = r
      .map((cell, k) => {
        const t = ellipsize(cell, widths[k]);
        const pad = " ".repeat(widths[k] - [...t].length);
        return keep[k].c.right ? pad + t : t + pad;
      })
      .join(GAP)
      .trimEnd();
    return Number.isFinite(width) ? ellipsize(line, width) : line;
  });
}

/**
 * A shell command over lines of at most `width` (when it can be: a single word longer stays
 * whole), broken at spaces outside quotes with a trailing ` \` so that the lines pasted
 * together still run as one command. `indent` starts every line.
 */
export function wrapCommand(cmd: string, width: number, indent: string): string[] {
  const words: string[] = [];
  let cur = "";
  let quote: string | null = null;
  let comment = "";
  for (let i = 0; i < cmd.length; i++) {
    const ch = cmd[i];
    if (quote) {
      if (ch === quote) quote = null;
    } else if ((ch === "'" || ch === '"') && (cur === "" || cur.endsWith("="))) quote = ch; // not an apostrophe ("Dockerfile's")
    else if (ch === "#" && cur === "") {
      // A comment runs to the end of its line, so a ` \` after it would not continue the command: it goes last, as comment lines.
      comment = cmd.slice(i + 1).trim();
      break;
    } else if (ch === " ") {
      if (cur) words.push(cur);
      cur = "";
      continue;
    }
    cur += ch;
  }
  if (cur) words.push(cur);
  const lines: string[] = [];
  let line = indent;
  for (const w of words) {
    const next = line === indent ? line + w : `${line} ${w}`;
    if ([...next].length + 2 > width && line !== indent) {
      lines.push(`${line} \\`);
      line = `${indent}  ${w}`;
    } else line = next;
  }
  lines.push(line);
  if (comment) lines.push(...wrapText(`${indent}# ${comment}`, width, `${indent}# `));
  return lines;
}

/** Prose over lines of at most `width`, broken at spaces; `indent` starts every line after the first. */
export function wrapText(text: string, width: number, indent = ""): string[] {
  if (!Number.isFinite(width) || [...text].length <= width) return [text];
  const lead = /^ */.exec(text)![0];
  const lines: string[] = [];
  let line = lead;
  for (const w of text.slice(lead.length).split(" ")) {
    const next = line.trim() === "" ? line + w : `${line} ${w}`;
    if ([...next].length > width && line.trim() !== "") {
      lines.push(line);
      line = indent + w;
    } else line = next;
  }
  lines.push(line);
  return lines;
}
