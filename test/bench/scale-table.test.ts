/**
 * The fleet-scale bench's pure parts (lab/bench/scale-table.ts): when the registry crossed the
 * DOWN threshold, the growth exponent, targets, the table and the plot. The bench itself runs
 * for minutes (`npm run bench -- --only scale`); these keep its arithmetic from rotting.
 */
import { describe, expect, it } from "vitest";
import { downCrossingAt, FIGURES, growthExponent, growthTable, renderGrowthTable, renderScaleSvg, withinTargets, type ScaleRow } from "../../lab/bench/scale-table";

function row(nodes: number, over: Partial<ScaleRow> = {}): ScaleRow {
  return {
    nodes, decisionP50Ms: 400, decisionMaxMs: 900, faultToDownMaxMs: 1500, silentToDownMs: 3500, redisCpuPercent: nodes / 200, redisOpsPerSec: nodes * 2,
    leaseRenewals: 40, leaseMissed: 0, registryReadP99Ms: nodes / 100, azHealthP99Ms: 3, heartbeatP99Ms: 2, statusReadP99Ms: nodes / 50, statusLines: 30, ...over,
  };
}

describe("the DOWN crossing", () => {
  it("is the ack that leaves fewer than downBelow × n healthy, whatever the order the acks came in", () => {
    // 8 nodes, downBelow 0.25: DOWN once healthy < 2, i.e. after the 7th unhealthy report.
    const acks = [70, 10, 20, 30, 40, 50, 60, 80];
    expect(downCrossingAt(acks, 8, 0.25)).toBe(70);
    // 4 nodes: healthy < 1 → all 4 must report.
    expect(downCrossingAt([5, 1, 3, 2], 4, 0.25)).toBe(5);
    expect(downCrossingAt([1, 2], 4, 0.25)).toBeNull();
  });
});

describe("growth", () => {
  it("measures the log-log slope: 1 for linear, 2 for quadratic, 0 for flat", () => {
    const ns = [500, 1000, 2000, 5000];
    expect(growthExponent(ns.map((n) => ({ n, y: 3 * n })))).toBe(1);
    expect(growthExponent(ns.map((n) => ({ n, y: n * n })))).toBe(2);
    expect(growthExponent(ns.map((n) => ({ n, y: 7 })))).toBe(0);
    expect(growthExponent([{ n: 500, y: 1 }])).toBeNull();
    expect(growthExponent([{ n: 500, y: 0 }, { n: 1000, y: 0 }])).toBeNull();
  });

  it("flags a scaled figure growing faster than linearly, and a missed target at any size", () => {
    const rows = [row(500), row(1000), row(2000, { registryReadP99Ms: 80, redisCpuPercent: 31 })];
    const t = growthTable(rows);
    expect(t.map((e) => e.figure)).toEqual(FIGURES.map((f) => f.label));
    const read = t.find((e) => e.figure === "registry read p99")!;
    expect(read.superlinear).toBe(true);
    expect(t.find((e) => e.figure === "Redis ops/s")!.superlinear).toBe(false);
    expect(t.find((e) => e.figure === "Redis CPU")!.values.map((v) => v.withinTarget)).toEqual([true, true, false]);
    expect(withinTargets(t)).toBe(false);
    expect(withinTargets(growthTable([row(500), row(1000)]))).toBe(true);
    const text = renderGrowthTable(t);
    expect(text).toMatch(/2,000 nodes/);
    expect(text).toMatch(/31 MISS/);
    expect(text).toMatch(/SUPERLINEAR/);
  });

  it("leaves out a figure no size measured, and shows '-' where one size lacks it", () => {
    const { silentToDownMs: _drop, ...without } = row(5000);
    void _drop;
    const t = growthTable([row(500), without]);
    expect(t.find((e) => e.figure === "silent AZ → DOWN")!.values.map((v) => v.nodes)).toEqual([500]);
    expect(renderGrowthTable(t)).toMatch(/silent AZ → DOWN \(ms\)\s+3,500\s+-\s/);
    expect(growthTable([without]).some((e) => e.figure === "silent AZ → DOWN")).toBe(false);
  });

  it("draws one panel per figure, a dashed target where there is one", () => {
    const svg = renderScaleSvg(growthTable([row(500), row(1000), row(2000)]), "t <&>");
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).toContain("t &lt;&amp;&gt;");
    expect((svg.match(/<polyline/g) ?? []).length).toBe(FIGURES.length);
    expect((svg.match(/stroke-dasharray/g) ?? []).length).toBe(FIGURES.filter((f) => f.target !== null && f.target > 0).length);
  });
});
