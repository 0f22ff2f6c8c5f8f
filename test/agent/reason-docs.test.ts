import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REASON_CODES } from "../../contracts/reasons";

describe("docs/reason-codes.md", () => {
  it("names every reason code the agent can emit, each in a table row with what sets and clears it", () => {
    const doc = readFileSync(join(__dirname, "..", "..", "docs", "reason-codes.md"), "utf8");
    const rows = new Map(
      doc
        .split("\n")
        .filter((l) => /^\| `[A-Z_]+` \|/.test(l))
        .map((l) => [/^\| `([A-Z_]+)`/.exec(l)![1], l.split("|").map((c) => c.trim())] as const),
    );
    expect([...rows.keys()].sort()).toEqual([...REASON_CODES].sort());
    for (const [code, cells] of rows) {
      expect(cells[2], code).toMatch(/^(hard|soft)$/);
      expect(cells[3], code).toMatch(/^(unreachable|unhealthy|loading|unknown|degraded)$/);
      expect(cells[4].length, code).toBeGreaterThan(10);
      expect(cells[5].length, code).toBeGreaterThan(5);
    }
  });
});
