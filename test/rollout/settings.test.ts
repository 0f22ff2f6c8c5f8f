/**
 * The rollout's settings (`LLMHA_ROLLOUT_*`: defaults, a bad value a start-up error naming the
 * variable), the actuator chosen from `LLMHA_ACTUATOR`, and same model everywhere relaxed only
 * while a rollout is active.
 */
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../agent/src/config/load";
import { rolloutSettingsOf } from "../../agent/src/fleet/rollout/settings";
import { createRolloutActuator } from "../../agent/src/fleet/actuators/rollout-index";
import { DEFAULT_ROLLOUT_SETTINGS } from "../../agent/src/fleet/rollout/types";
import { allowedRevisions, relaxForRollout } from "../../agent/src/fleet/rollout/sameness";
import { modelSameness } from "../../agent/src/node/evaluator/model-sameness";
import { testLogger } from "../redis/helpers";

const base = { LLMHA_AZ: "az-a", LLMHA_NODE_ID: "n1" };

describe("rollout settings", () => {
  it("defaults, and values from the environment", () => {
    expect(rolloutSettingsOf(parseConfig([], base))).toEqual(DEFAULT_ROLLOUT_SETTINGS);
    const c = parseConfig(["--rollout-bake-ms", "60000"], { ...base, LLMHA_ROLLOUT_LATENCY_TOLERANCE: "0.5", LLMHA_ROLLOUT_ERROR_TOLERANCE: "0.02", LLMHA_ROLLOUT_LOAD_TIMEOUT_MS: "600000", LLMHA_ROLLOUT_LOAD_RATIO: "2" });
    expect(rolloutSettingsOf(c)).toEqual({ ...DEFAULT_ROLLOUT_SETTINGS, bakeMs: 60_000, latencyTolerance: 0.5, errorTolerance: 0.02, loadTimeoutMs: 600_000, loadRatio: 2 });
  });

  it("a bad value is a start-up error naming the variable", () => {
    const bad = (env: Record<string, string>, re: RegExp): void => {
      let err: unknown;
      try {
        parseConfig([], { ...base, ...env });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(re);
    };
    bad({ LLMHA_ROLLOUT_LATENCY_TOLERANCE: "lots" }, /LLMHA_ROLLOUT_LATENCY_TOLERANCE.* must be a number/);
    bad({ LLMHA_ROLLOUT_ERROR_TOLERANCE: "2" }, /LLMHA_ROLLOUT_ERROR_TOLERANCE.* must be between 0 and 1/);
    bad({ LLMHA_ROLLOUT_LOAD_RATIO: "0.5" }, /LLMHA_ROLLOUT_LOAD_RATIO.* must be between 1 and 100/);
    bad({ LLMHA_ROLLOUT_LOAD_TIMEOUT_MS: "10" }, /LLMHA_ROLLOUT_LOAD_TIMEOUT_MS.* must be between 1000/);
    bad({ LLMHA_ROLLOUT_BAKE_MS: "-1" }, /LLMHA_ROLLOUT_BAKE_MS.* must be a whole number/);
  });

  it("the actuator: dry-run (node granularity, nothing called), local (the drill's cloud), aws with a Kubernetes inventory (az granularity, and the ConfigMap read as requests); none otherwise or on a GPU node", async () => {
    const base = { inventory: "", inventoryTokenFile: "", inventoryCaFile: "", rolloutNamespace: "llm-ha" };
    const dry = createRolloutActuator({ ...base, actuator: "dry-run", role: "all" }, testLogger()).actuator;
    expect(dry).toMatchObject({ kind: "dry-run", granularity: "node" });
    expect(await dry!.switch({ rolloutId: "r", az: "a", nodes: [{ nodeId: "a1", host: "i-1" }], to: { revision: "v2" }, token: 1 })).toMatchObject({ outcome: "dry-run", detail: "would switch a1 in a to v2" });
    expect(createRolloutActuator({ ...base, actuator: "local", role: "all", localCloudUrl: "http://127.0.0.1:9" }, testLogger()).actuator).toMatchObject({ kind: "local", granularity: "node" });
    const kube = createRolloutActuator({ ...base, inventory: "http://127.0.0.1:9", actuator: "aws", role: "all" }, testLogger());
    expect(kube.actuator).toMatchObject({ kind: "kubernetes", granularity: "az" });
    expect(kube.extraRequest).toBeTypeOf("function");
    expect(createRolloutActuator({ ...base, actuator: "none", role: "all" }, testLogger()).actuator).toBeNull();
    expect(createRolloutActuator({ ...base, actuator: "aws", role: "all" }, testLogger()).actuator).toBeNull();
    expect(createRolloutActuator({ ...base, actuator: "dry-run", role: "node" }, testLogger()).actuator).toBeNull();
  });
});

describe("same model everywhere while a rollout is active", () => {
  const rows = [
    { nodeId: "a1", az: "a", model: "m", revision: "v2" },
    { nodeId: "a2", az: "a", model: "m", revision: "v1" },
    { nodeId: "b1", az: "b", model: "m", revision: "v1" },
    { nodeId: "b2", az: "b", model: "m", revision: "v3" },
    { nodeId: "c1", az: "c", model: "other", revision: "v1" },
  ];
  it("nodes on the rollout's two revisions are no outliers while it is active; others still are", () => {
    const same = modelSameness(rows);
    expect(same.outliers.map((o) => o.nodeId)).toEqual(["a1", "b2", "c1"]);
    const relaxed = relaxForRollout(same, allowedRevisions("baking", "v1,v2"), rows);
    expect(relaxed.outliers.map((o) => o.nodeId)).toEqual(["b2", "c1"]);
    expect(relaxed.agreeing).toBe(same.agreeing + 1);
    expect(relaxed.outlierAzs).toEqual(["c"]);
  });
  it("once it ends, the normal check applies", () => {
    expect(allowedRevisions("promoted", "v2")).toBeNull();
    expect(allowedRevisions(undefined, undefined)).toBeNull();
    const same = modelSameness(rows);
    expect(relaxForRollout(same, allowedRevisions("rolled-back", "v1"), rows)).toBe(same);
  });
});
