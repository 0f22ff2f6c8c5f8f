import { describe, expect, it } from "vitest";
import { awaitRecovery, blank, type ScenarioContext } from "../../lab/drill/scenarios/runner";
import { emptyTimeline, type Sample } from "../../lab/drill/timeline";

/** A context whose observer hands out `samples` in turn, each pushed to the timeline as it completes. */
function fakeContext(samples: Sample[]): ScenarioContext {
  const tl = emptyTimeline();
  let t = 0;
  const observer = {
    async tick(): Promise<Sample> {
      const s = samples.shift() ?? { t: t + 100, nodes: {}, l1: {}, dns: null };
      t = Math.max(t, s.t) + 50;
      tl.samples.push(s);
      return s;
    },
    latest: () => tl.samples.at(-1) ?? null,
    latestFleet: () => null,
    stop: async () => undefined,
  };
  return { stack: {} as ScenarioContext["stack"], tl, observer, now: () => t, progress: () => undefined, fleetWired: true, cuts: null };
}

const up = (t: number): Sample => ({ t, nodes: { "gpu-a1": { status: "HEALTHY", weight: 100 } }, l1: {}, dns: null });
const back = (s: Sample): boolean => s.nodes["gpu-a1"]?.status === "HEALTHY";

describe("awaitRecovery", () => {
  it("times the recovery by a sample taken after the heal, not one begun before it that ended after (a loaded machine)", async () => {
    const ctx = fakeContext([up(900), up(1300)]);
    const r = blank("leader-pause", 1);
    r.healAt = 1000;
    await awaitRecovery(ctx, r, "gpu-a1", back);
    expect(r.recoveryMs).toBe(300);
    expect(r.notes).toEqual([]);
  });
  it("notes a victim that never came back within 30 s", async () => {
    const ctx = fakeContext([]);
    const r = blank("crash", 1);
    r.healAt = 0;
    await awaitRecovery(ctx, r, "gpu-a1", back);
    expect(r.recoveryMs).toBeNull();
    expect(r.notes).toEqual(["gpu-a1 did not recover in 30 s"]);
  });
});
