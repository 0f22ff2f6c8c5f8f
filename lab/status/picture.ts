/**
 * The README picture of `llm-ha status`: the real view of a real fleet (redis-server, one
 * `Fleet` per node, faults injected; see demo.ts), rendered with colours as a terminal
 * would show it, then drawn as SVG: monospace text, each ANSI colour mapped to a fill.
 *
 *   npx tsx lab/status/picture.ts [docs/img/status.svg]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { escapeXml, STATUS_COLORS } from "../drill/svg";
import { startRedisServer } from "../engines/redis-server";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { createLogger, safeUrl } from "../../agent/src/util/log";
import { startDemoFleet } from "./demo";
import { renderFleetView, SGR } from "../../agent/src/ops/status/render";
import { readFleetView } from "../../agent/src/ops/status/view";

const FG: Readonly<Record<string, string>> = Object.freeze({
  [SGR.red]: STATUS_COLORS.UNHEALTHY,
  [SGR.green]: STATUS_COLORS.HEALTHY,
  [SGR.yellow]: STATUS_COLORS.DEGRADED,
  [SGR.cyan]: "#5fb3d9",
});
const TEXT = "#e6e6e6";
const DIM = "#8b9099";
const BACKGROUND = "#1d1f21";

interface Span {
  col: number;
  text: string;
  fill: string;
  bold: boolean;
  inverse: boolean;
}

/** Splits one line with ANSI SGR sequences into styled runs at their columns. */
export function ansiSpans(line: string): Span[] {
  const spans: Span[] = [];
  let fg: string | null = null;
  let bold = false;
  let dim = false;
  let inverse = false;
  let col = 0;
  const re = /\x1b\[([0-9;]*)m/g; // eslint-disable-line no-control-regex
  let at = 0;
  const push = (text: string): void => {
    if (!text) return;
    spans.push({ col, text, fill: fg ?? (dim ? DIM : TEXT), bold, inverse });
    col += [...text].length;
  };
  for (let m = re.exec(line); m; m = re.exec(line)) {
    push(line.slice(at, m.index));
    at = m.index + m[0].length;
    for (const code of (m[1] || "0").split(";")) {
      if (code === "0") [fg, bold, dim, inverse] = [null, false, false, false];
      else if (code === SGR.bold) bold = true;
      else if (code === SGR.dim) dim = true;
      else if (code === SGR.inverse) inverse = true;
      else if (FG[code]) fg = FG[code];
    }
  }
  push(line.slice(at));
  return spans;
}

export interface TerminalSvgOptions {
  /** Shown as the command line above the output. */
  command: string;
  /** Columns of the terminal. Default 100. */
  columns?: number;
}

/** Terminal lines (with ANSI colours) as an SVG picture of a terminal window. */
export function terminalSvg(lines: readonly string[], o: TerminalSvgOptions): string {
  const cw = 7.8; // advance of a 13 px monospace glyph (0.6 em)
  const lh = 17;
  const padX = 16;
  const top = 34;
  const columns = o.columns ?? 100;
  const width = Math.ceil(padX * 2 + columns * cw);
  const rows = [`$ ${o.command}`, ...lines];
  const height = top + rows.length * lh + 14;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace" font-size="13">`,
    `<rect width="100%" height="100%" rx="8" fill="${BACKGROUND}"/>`,
    ...["#ff5f56", "#ffbd2e", "#27c93f"].map((c, i) => `<circle cx="${18 + i * 18}" cy="15" r="5.5" fill="${c}"/>`),
  ];
  rows.forEach((row, i) => {
    const y = top + i * lh + 12;
    const spans = i === 0 ? [{ col: 0, text: row, fill: DIM, bold: false, inverse: false }] : ansiSpans(row);
    for (const s of spans) {
      const x = padX + s.col * cw;
      if (s.inverse) out.push(`<rect x="${x.toFixed(1)}" y="${y - 12}" width="${([...s.text].length * cw).toFixed(1)}" height="${lh}" fill="${s.fill}"/>`);
      const weight = s.bold ? ` font-weight="bold"` : "";
      out.push(`<text x="${x.toFixed(1)}" y="${y}" fill="${s.inverse ? BACKGROUND : s.fill}"${weight} xml:space="preserve">${escapeXml(s.text)}</text>`);
    }
  });
  out.push("</svg>", "");
  return out.join("\n");
}

async function main(): Promise<void> {
  const target = process.argv[2] ?? join(__dirname, "..", "..", "docs", "img", "status.svg");
  const log = createLogger({ level: "silent" });
  const redis = await startRedisServer();
  const cluster = "prod";
  try {
    const fleet = await startDemoFleet({ redisUrl: redis.url, cluster, log, intervalMs: 500, paceMs: 3000 });
    try {
      await new Promise((r) => setTimeout(r, 2000)); // let the ages read like a live fleet
      const view = await readFleetView(fleet.nodes[0].fleet.client.redis, new RedisKeys(cluster), { events: 10, url: safeUrl(redis.url) });
      const lines = renderFleetView(view, { color: true });
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, terminalSvg(lines, { command: `llm-ha status --cluster ${cluster}` }));
      process.stdout.write(`${target}\n${lines.join("\n")}\n`);
    } finally {
      await fleet.stop();
    }
  } finally {
    await redis.stop();
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`status picture: ${(err as Error).message}\n`);
    process.exit(1);
  });
}
