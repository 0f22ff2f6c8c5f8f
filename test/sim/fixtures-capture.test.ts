import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

// The fake's data files are copies of sections of the whole captures kept beside them (captures/).
const CAPTURES = resolve(__dirname, "../../lab/sim/fixtures/captures");
const OURS = resolve(__dirname, "../../lab/sim/fixtures");
const H100 = join(CAPTURES, "h100-80gb-hbm3-driver-590.48.01-capture.txt");
const H100X8 = join(CAPTURES, "8xh100-80gb-hbm3-driver-535.183.01-q.txt");

/** The lines of the section whose title starts with `title`, after its `####` rule. */
function section(lines: string[], title: string): string[] {
  const start = lines.findIndex((l) => l.startsWith(`# ${title}`));
  expect(start, title).toBeGreaterThan(0);
  let i = start;
  while (!lines[i].startsWith("####")) i++;
  const end = lines.findIndex((l, j) => j > i && l.startsWith("####"));
  return lines.slice(i + 1, end);
}

const HAVE_CAPTURES = existsSync(H100) && existsSync(H100X8);

describe.skipIf(!HAVE_CAPTURES)("fake nvidia-smi data matches the captures", () => {
  // vitest collects a skipped suite too: read only when the captures are there.
  const capture = HAVE_CAPTURES ? readFileSync(H100, "utf8").split("\n") : [];

  it.each(["idle", "load"])("%s query-gpu csv is the captured header and row", (profile) => {
    const [header, row] = section(capture, `${profile} :: query-gpu (csv`);
    expect(readFileSync(join(OURS, `h100-query-gpu-${profile}.csv`), "utf8")).toBe(`${header}\n${row}\n`);
  });

  it("aliases are the help's \"name\" or \"alias\" pairs", () => {
    const pairs: Record<string, string> = {};
    for (const l of section(capture, "capabilities :: help-query-gpu")) {
      const m = /^"([^"]+)" or "([^"]+)"$/.exec(l);
      if (m && m[1] !== m[2]) pairs[m[2]] = m[1];
    }
    expect(JSON.parse(readFileSync(join(OURS, "h100-query-gpu-aliases.json"), "utf8"))).toEqual(pairs);
  });

  it("GPU identities are those of the 8×H100 -q capture", () => {
    const blocks = readFileSync(H100X8, "utf8").split(/^GPU (?=[0-9A-F]{8}:)/m).slice(1);
    const field = (b: string, k: string): string => new RegExp(`^\\s*${k}\\s*: (.*)$`, "m").exec(b)?.[1].trim() ?? "";
    const captured = blocks.map((b) => ({
      index: Number(field(b, "Minor Number")),
      uuid: field(b, "GPU UUID"),
      busId: field(b, "Bus Id"),
      serial: field(b, "Serial Number"),
    }));
    expect(captured).toHaveLength(8);
    expect(JSON.parse(readFileSync(join(OURS, "h100x8-gpus.json"), "utf8"))).toEqual(captured);
  });
});
