/**
 * How the drill's world stops what it started: last started first, and the neighbours of one
 * group (the simulated nodes, whose agents each drain for a second) together, so a world of
 * eight nodes does not take eight drains to stop.
 */
import { describe, expect, it } from "vitest";
import { stopWaves } from "../../lab/drill/world";

describe("the world's stop waves", () => {
  it("groups neighbours of one group, keeps every other stop alone and the order as given", () => {
    const s = (_name: string, group?: string) => ({ stop: async () => undefined, group });
    const waves = stopWaves([s("cloud"), s("n1", "nodes"), s("n2", "nodes"), s("n3", "nodes"), s("dns"), s("n4", "nodes"), s("redis"), s("a"), s("b")]);
    expect(waves.map((w) => w.length)).toEqual([1, 3, 1, 1, 1, 1, 1]);
    expect(stopWaves([])).toEqual([]);
  });

  it("runs a wave's stops at once and the next wave after it", async () => {
    let running = 0;
    let most = 0;
    const log: string[] = [];
    const slow = (name: string) => async () => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 20));
      running--;
      log.push(name);
    };
    const waves = stopWaves([
      { stop: slow("n1"), group: "nodes" },
      { stop: slow("n2"), group: "nodes" },
      { stop: slow("n3"), group: "nodes" },
      { stop: slow("redis") },
    ]);
    for (const wave of waves) await Promise.all(wave.map((f) => f()));
    expect(most).toBe(3);
    expect(log[3]).toBe("redis");
  });
});
