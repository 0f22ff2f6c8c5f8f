/**
 * The drill's samples: with the continuation relay an AZ proxy reaches each node through two
 * backends (straight, and through the relay for completions); a node's sampled row is both.
 */
import { describe, expect, it } from "vitest";
import { l1Removed, mergeRows, sampleKey } from "../../lab/drill/timeline";

describe("a node's row in an AZ proxy with its continuation relay", () => {
  it("is keyed as the straight backend's, whichever backend the stats row came from", () => {
    expect(sampleKey("az_a_relayed", "gpu-a1")).toBe("az_a_servers/gpu-a1");
    expect(sampleKey("az_a_servers", "gpu-a1")).toBe("az_a_servers/gpu-a1");
    expect(sampleKey("baseline_default_servers", "gpu-a1")).toBe("baseline_default_servers/gpu-a1");
  });

  it("sums the requests, and is out of rotation when either backend has the node out", () => {
    const up = { status: "UP", weight: 100, total: 3 };
    expect(mergeRows(up, { status: "UP", weight: 100, total: 40 })).toEqual({ status: "UP", weight: 100, total: 43 });
    // The relayed backend took a crashed node out at its first refused connection; the straight one has not yet.
    const gone = mergeRows(up, { status: "DOWN", weight: 100, total: 40 });
    expect([gone.status, gone.total, l1Removed(gone)]).toEqual(["DOWN", 43, true]);
    expect(l1Removed(mergeRows({ status: "DOWN", weight: 100, total: 1 }, up))).toBe(true);
    // A drained node (weight 0 from its agent) in one is out.
    expect(l1Removed(mergeRows(up, { status: "UP", weight: 0, total: 0 }))).toBe(true);
  });
});
