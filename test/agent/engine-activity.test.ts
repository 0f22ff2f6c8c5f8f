import { describe, expect, it } from "vitest";
import { ENGINE_LOOK_MS, EngineActivity, enginePeriodMs } from "../../agent/src/node/sources/engine-metrics";
import type { EngineObservation } from "../../agent/src/node/sources/signals";

const obs = (tokens: number, o: Partial<EngineObservation> = {}): EngineObservation => ({ family: "vllm", running: 0, waiting: 0, kvCacheUsage: 0, tokensTotal: tokens, ...o });

describe("the engine read fast only while it serves others or holds the probe", () => {
  it("the agent's own probes are not others' work; a queue, a batch or tokens beyond them are", () => {
    const a = new EngineActivity();
    a.update(obs(100), 65);
    expect(a.busy).toBe(false);
    // Two probes answered between reads, a few tokens each: idle.
    a.probeAnswered();
    a.probeAnswered();
    a.update(obs(106), 65);
    expect(a.busy).toBe(false);
    // Traffic: hundreds of tokens in two seconds.
    a.probeAnswered();
    a.update(obs(900), 65);
    expect(a.busy).toBe(true);
    a.update(obs(900, { waiting: 2 }), 65);
    expect(a.busy).toBe(true);
    a.update(obs(900, { running: 3 }), 65);
    expect(a.busy).toBe(true);
    a.update(obs(900), 65);
    expect(a.busy).toBe(false);
    a.update(null, 65);
    expect(a.busy).toBe(false);
  });

  it("Triton's counters are steps and executions: a few beyond the probes' is others' work", () => {
    const a = new EngineActivity();
    a.update(obs(10, { family: "triton" }), 65);
    a.probeAnswered();
    a.update(obs(13, { family: "triton" }), 65);
    expect(a.busy).toBe(false);
    a.probeAnswered();
    a.update(obs(40, { family: "triton" }), 65);
    expect(a.busy).toBe(true);
  });

  it("fast while busy or while the probe has gone unanswered past the look, else the idle period", () => {
    expect(enginePeriodMs({}, false, 200, 2000, 10_000)).toBe(2000);
    expect(enginePeriodMs({}, true, 200, 2000, 10_000)).toBe(200);
    expect(enginePeriodMs({ probeInFlightSince: 10_000 - ENGINE_LOOK_MS + 1 }, false, 200, 2000, 10_000)).toBe(2000);
    expect(enginePeriodMs({ probeInFlightSince: 10_000 - ENGINE_LOOK_MS }, false, 200, 2000, 10_000)).toBe(200);
    // Never slower than the fast period, whatever the idle one says.
    expect(enginePeriodMs({}, false, 500, 100, 10_000)).toBe(500);
  });
});
