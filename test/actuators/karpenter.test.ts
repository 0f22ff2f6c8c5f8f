/**
 * The Karpenter capacity engine against a small fake Kubernetes API on loopback (NodePools with
 * merge patches, NodeClaims listed by pool label and deleted, a Deployment's scale): the wake
 * raises the first pool's GPU limit and scales the placeholder, a repeat is `already`; the
 * follow reads NodeClaims (launching, in service, `Launched` False InsufficientCapacity) and
 * raises the next pool on ICE or past the wake bound, one per call, until every pool failed
 * (`unavailable`); the release scales the placeholder to 0, sets every limit to "0" and deletes
 * the NodeClaims. Bad settings are refused at start-up with the variable named.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import pino from "pino";
import { KarpenterEngine, WOKEN_AT_ANNOTATION } from "../../agent/src/fleet/actuators/karpenter/standby";
import { parseStandbyNodePools, parseStandbyPlaceholder, parseStandbySchedule } from "../../agent/src/fleet/actuators/karpenter/settings";
import { ConfigError, parseConfig } from "../../agent/src/config/load";
import { createActuatorImpl } from "../../agent/src/fleet/actuators/index";
import { FakeKarpenterApi, GPU } from "./fake-karpenter-api";

const api = new FakeKarpenterApi();
const ICE = "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1c).";
let url = "";
const calls = api.calls;

beforeAll(async () => {
  await api.start();
  url = api.url;
});
afterAll(() => api.stop());
beforeEach(() => api.reset(["llm-ha-us-east-1c-h100", "llm-ha-us-east-1c-a100"]));

function engine(now: () => number = Date.now, extra: Partial<ConstructorParameters<typeof KarpenterEngine>[0]> = {}): KarpenterEngine {
  return new KarpenterEngine({
    api: { url, tokenFile: null, caFile: null },
    pools: parseStandbyNodePools("llm-ha-us-east-1c-h100=16,llm-ha-us-east-1c-a100=16"),
    placeholder: parseStandbyPlaceholder("llm-ha/llm-ha-standby-placeholder=2"),
    standbyAz: "us-east-1c",
    wakeBoundMs: 60_000,
    now,
    ...extra,
  });
}
const ctx = { token: 7, reason: "capacity lost: us-east-1a=DOWN" };
const writes = (): string[] => api.writes();

describe("Karpenter engine: wake", () => {
  it("raises the first pool's GPU limit (merge patch, wake time annotated) and scales the placeholder; a repeat is already", async () => {
    const e = engine();
    const r = await e.wakeStandby("us-east-1c", ctx);
    expect(r).toMatchObject({ action: "standby.wake", outcome: "applied", wake: { phase: "waiting", step: 0, steps: 2, groups: ["llm-ha-us-east-1c-h100"] } });
    expect(r.detail).toMatch(/llm-ha-us-east-1c-h100 nvidia.com\/gpu limit 0→16; placeholder llm-ha\/llm-ha-standby-placeholder replicas 0→2/);
    const h100 = api.pools.get("llm-ha-us-east-1c-h100")!;
    expect(h100.spec.limits[GPU]).toBe("16");
    expect(Number(h100.metadata.annotations[WOKEN_AT_ANNOTATION])).toBeGreaterThan(0);
    expect(api.pools.get("llm-ha-us-east-1c-a100")!.spec.limits[GPU]).toBe("0");
    expect(api.scale.replicas).toBe(2);
    expect(calls.filter((c) => c.method === "PATCH").every((c) => c.type === "application/merge-patch+json")).toBe(true);
    calls.length = 0;
    const again = await e.wakeStandby("us-east-1c", ctx);
    expect(again.outcome).toBe("already");
    expect(writes()).toEqual([]);
  });

  it("follows the NodeClaims: launched is waiting, initialized is serving", async () => {
    const e = engine();
    await e.wakeStandby("us-east-1c", ctx);
    api.claim("h100-a", "llm-ha-us-east-1c-h100", [["Launched", "True"], ["Registered", "Unknown"], ["Initialized", "Unknown"]]);
    expect((await e.wakeStandby("us-east-1c", ctx)).wake).toMatchObject({ phase: "waiting" });
    expect((await e.wakeStandby("us-east-1c", ctx)).detail).toMatch(/1 launching/);
    api.claim("h100-a", "llm-ha-us-east-1c-h100", [["Launched", "True"], ["Registered", "True"], ["Initialized", "True"]]);
    const r = await e.wakeStandby("us-east-1c", ctx);
    expect(r).toMatchObject({ outcome: "already", wake: { phase: "serving", step: 0 } });
  });

  it("on InsufficientCapacity raises the next pool (class capacity), keeps the first raised; when every pool failed: unavailable", async () => {
    const e = engine();
    await e.wakeStandby("us-east-1c", ctx);
    api.claim("h100-a", "llm-ha-us-east-1c-h100", [["Launched", "False", "InsufficientCapacity", ICE], ["Initialized", "Unknown"]]);
    const r = await e.wakeStandby("us-east-1c", ctx);
    expect(r).toMatchObject({ outcome: "applied", wake: { phase: "fallback", step: 1, groups: ["llm-ha-us-east-1c-a100"], failure: { class: "capacity", group: "llm-ha-us-east-1c-h100" } } });
    expect(r.wake!.failure!.message).toMatch(/^InsufficientCapacity: We currently do not have sufficient/);
    expect(api.pools.get("llm-ha-us-east-1c-a100")!.spec.limits[GPU]).toBe("16");
    expect(api.pools.get("llm-ha-us-east-1c-h100")!.spec.limits[GPU]).toBe("16");
    api.claim("a100-a", "llm-ha-us-east-1c-a100", [["Launched", "False", "InsufficientCapacity", ICE.replace("p5.48xlarge", "p4d.24xlarge")]]);
    const last = await e.wakeStandby("us-east-1c", ctx);
    expect(last).toMatchObject({ outcome: "failed", wake: { phase: "unavailable", step: 1 } });
    expect(last.detail).toMatch(/capacity unavailable: every step failed/);
  });

  it("a pool with no NodeClaim in service within the wake bound has failed (timeout): the next is raised", async () => {
    let now = Date.now();
    const e = engine(() => now);
    await e.wakeStandby("us-east-1c", ctx);
    now += 30_000;
    expect((await e.wakeStandby("us-east-1c", ctx)).wake?.phase).toBe("waiting");
    now += 31_000;
    const r = await e.wakeStandby("us-east-1c", ctx);
    expect(r.wake).toMatchObject({ phase: "fallback", step: 1, failure: { class: "timeout", group: "llm-ha-us-east-1c-h100" } });
  });

  it("a failure from before the wake does not count; a missing fallback pool is skipped, a missing first pool fails the wake", async () => {
    api.claim("old", "llm-ha-us-east-1c-h100", [["Launched", "False", "InsufficientCapacity", ICE]], Date.now() - 3_600_000);
    api.pools.delete("llm-ha-us-east-1c-a100");
    const e = engine();
    const r = await e.wakeStandby("us-east-1c", ctx);
    expect(r.wake).toMatchObject({ phase: "waiting", steps: 1 });
    expect((await e.wakeStandby("us-east-1c", ctx)).wake?.phase).toBe("waiting");
    expect(r.detail).toMatch(/fallback NodePool llm-ha-us-east-1c-a100 not found: skipped/);
    api.pools.delete("llm-ha-us-east-1c-h100");
    expect(await e.wakeStandby("us-east-1c", ctx)).toMatchObject({ outcome: "failed", detail: "NodePool llm-ha-us-east-1c-h100 not found (LLMHA_STANDBY_NODEPOOLS)" });
  });

  it("an API refusal fails the action with the status and message; another AZ is refused", async () => {
    api.deny = "/scale";
    const r = await engine().wakeStandby("us-east-1c", ctx);
    expect(r.outcome).toBe("failed");
    expect(r.detail).toMatch(/placeholder not scaled: GET \/apis\/apps\/v1\/namespaces\/llm-ha\/deployments\/llm-ha-standby-placeholder\/scale: HTTP 403 forbidden/);
    // The pool is raised and the follow goes on: the report is there for the reconciler.
    expect(r.wake).toMatchObject({ phase: "waiting", step: 0 });
    expect(api.pools.get("llm-ha-us-east-1c-h100")!.spec.limits[GPU]).toBe("16");
    api.deny = "/nodepools/";
    expect((await engine().wakeStandby("us-east-1c", ctx)).detail).toMatch(/GET \/apis\/karpenter.sh\/v1\/nodepools\/llm-ha-us-east-1c-h100: HTTP 403/);
    expect((await engine().wakeStandby("us-east-1a", ctx)).detail).toMatch(/no standby NodePools in us-east-1a/);
  });
});

describe("Karpenter engine in the actuator", () => {
  it("with LLMHA_ACTUATOR=local the standby actions go to the NodePools, shifts stay with the local cloud", async () => {
    const a = await createActuatorImpl(
      { actuator: "local", localCloudUrl: url, awsRegion: null, standbyAz: "us-east-1c", standbyAsgs: null, shiftResources: [], azIds: null, capacityEngine: "karpenter", standbyNodepools: "llm-ha-us-east-1c-h100=16", standbyPlaceholder: null, inventory: url },
      pino({ level: "silent" }),
    );
    expect(a!.kind).toBe("local");
    expect((await a!.wakeStandby("us-east-1c", ctx)).outcome).toBe("applied");
    expect(api.pools.get("llm-ha-us-east-1c-h100")!.spec.limits[GPU]).toBe("16");
    await expect(a!.startZonalShift("us-east-1a", { ...ctx, expiresInMs: 60_000 })).rejects.toThrow(/local cloud \/shift\/start: HTTP 404/);
    expect(calls.some((c) => c.path === "/standby/wake")).toBe(false);
  });
});

describe("Karpenter engine: release", () => {
  it("placeholder to 0, every limit to \"0\" with the annotation removed, NodeClaims deleted; a repeat is already", async () => {
    const e = engine();
    await e.wakeStandby("us-east-1c", ctx);
    api.claim("h100-a", "llm-ha-us-east-1c-h100", [["Launched", "True"], ["Initialized", "True"]]);
    api.claim("h100-b", "llm-ha-us-east-1c-h100", [["Launched", "True"], ["Initialized", "Unknown"]]);
    calls.length = 0;
    const r = await e.releaseStandby("us-east-1c", ctx);
    expect(r.outcome).toBe("applied");
    expect(writes()).toEqual([
      "PATCH /apis/apps/v1/namespaces/llm-ha/deployments/llm-ha-standby-placeholder/scale",
      "PATCH /apis/karpenter.sh/v1/nodepools/llm-ha-us-east-1c-h100",
      "DELETE /apis/karpenter.sh/v1/nodeclaims/h100-a",
      "DELETE /apis/karpenter.sh/v1/nodeclaims/h100-b",
    ]);
    expect(api.scale.replicas).toBe(0);
    expect(api.pools.get("llm-ha-us-east-1c-h100")!.spec.limits[GPU]).toBe("0");
    expect(api.pools.get("llm-ha-us-east-1c-h100")!.metadata.annotations[WOKEN_AT_ANNOTATION]).toBeUndefined();
    expect(api.claims.size).toBe(0);
    calls.length = 0;
    expect((await e.releaseStandby("us-east-1c", ctx)).outcome).toBe("already");
    expect(writes()).toEqual([]);
  });
});

describe("Karpenter engine: audit", () => {
  it("reports a pool raised or a placeholder scaled with no llm-ha wake, and nothing for its own wake", async () => {
    const e = engine();
    expect(await e.audit()).toEqual([]);
    await e.wakeStandby("us-east-1c", ctx);
    expect(await e.audit()).toEqual([]);
    await e.releaseStandby("us-east-1c", ctx);
    api.pools.get("llm-ha-us-east-1c-a100")!.spec.limits[GPU] = "8";
    api.scale.replicas = 1;
    const seen = await e.audit();
    expect(seen.map((f) => f.detail)).toEqual([
      "NodePool llm-ha-us-east-1c-a100 nvidia.com/gpu limit 8: above 0 with no llm-ha wake (no llm-ha.io/woken-at annotation)",
      "placeholder llm-ha/llm-ha-standby-placeholder at 1 replicas with no llm-ha wake",
    ]);
    expect(seen.every((f) => f.kind === "standby" && f.az === "us-east-1c")).toBe(true);
    expect(calls.filter((c) => c.method !== "GET").length).toBeGreaterThan(0);
    api.calls.length = 0;
    await e.audit();
    expect(api.writes()).toEqual([]);
  });
});

describe("Karpenter settings", () => {
  it("parsers name the problem", () => {
    expect(parseStandbyNodePools("a=8, b=16")).toEqual([{ name: "a", gpus: 8 }, { name: "b", gpus: 16 }]);
    expect(() => parseStandbyNodePools("a=gpus")).toThrow(/GPU limit of a must be an integer/);
    expect(() => parseStandbyNodePools("a")).toThrow(/entry "a" is not nodepool=gpus/);
    expect(() => parseStandbyNodePools("a=1,a=2")).toThrow(/lists a twice/);
    expect(() => parseStandbyNodePools("Big_Pool=1")).toThrow(/is not a NodePool name/);
    expect(parseStandbyPlaceholder("llm-ha/ph=3")).toEqual({ namespace: "llm-ha", deployment: "ph", replicas: 3 });
    expect(() => parseStandbyPlaceholder("ph=3")).toThrow(/is not namespace\/deployment=replicas/);
    expect(parseStandbySchedule("0 20 * * 1-5;0 7 * * 1-5;0 20 * * 5")).toEqual({ scaleDown: "0 20 * * 1-5", scaleUp: "0 7 * * 1-5", weekendDown: "0 20 * * 5" });
    expect(() => parseStandbySchedule("0 20 * * 1-5")).toThrow(/scaleDown;scaleUp/);
    expect(() => parseStandbySchedule("0 20 * * 1-5;0 70 * * *")).toThrow(/scaleUp "0 70 \* \* \*"/);
  });

  const base = { LLMHA_AZ: "us-east-1a", LLMHA_NODE_ID: "n1", LLMHA_REDIS_URL: "redis://127.0.0.1:6379", LLMHA_ACTUATOR: "local", LLMHA_LOCAL_CLOUD_URL: "http://127.0.0.1:9", LLMHA_STANDBY_AZ: "us-east-1c", LLMHA_INVENTORY: "http://127.0.0.1:9" };
  const refused = (env: Record<string, string>): string => {
    try {
      parseConfig([], { ...base, ...env });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error("accepted");
  };

  it("start-up refuses bad combinations with the variable named", () => {
    expect(refused({ LLMHA_CAPACITY_ENGINE: "karpenter" })).toMatch(/^LLMHA_STANDBY_NODEPOOLS .*is required with LLMHA_CAPACITY_ENGINE=karpenter and LLMHA_STANDBY_AZ/);
    expect(refused({ LLMHA_CAPACITY_ENGINE: "karpenter", LLMHA_STANDBY_NODEPOOLS: "pool-a=gpus" })).toMatch(/^LLMHA_STANDBY_NODEPOOLS .*GPU limit of pool-a/);
    expect(refused({ LLMHA_CAPACITY_ENGINE: "karpenter", LLMHA_STANDBY_NODEPOOLS: "pool-a=8", LLMHA_STANDBY_PLACEHOLDER: "ph" })).toMatch(/^LLMHA_STANDBY_PLACEHOLDER /);
    expect(refused({ LLMHA_CAPACITY_ENGINE: "karpenter", LLMHA_STANDBY_NODEPOOLS: "pool-a=8", LLMHA_STANDBY_SCHEDULE: "0 20 * * *" })).toMatch(/^LLMHA_STANDBY_SCHEDULE /);
    expect(refused({ LLMHA_CAPACITY_ENGINE: "karpenter", LLMHA_STANDBY_NODEPOOLS: "pool-a=8", LLMHA_STANDBY_SCHEDULE_TZ: "Mars/Base" })).toMatch(/^LLMHA_STANDBY_SCHEDULE_TZ /);
    expect(refused({ LLMHA_CAPACITY_ENGINE: "karpenter", LLMHA_STANDBY_NODEPOOLS: "pool-a=8", LLMHA_INVENTORY: "none" })).toMatch(/^LLMHA_INVENTORY .*is required with LLMHA_CAPACITY_ENGINE=karpenter/);
    expect(refused({ LLMHA_STANDBY_NODEPOOLS: "pool-a=8" })).toMatch(/^LLMHA_STANDBY_NODEPOOLS .*only with LLMHA_CAPACITY_ENGINE=karpenter/);
    expect(refused({ LLMHA_CAPACITY_ENGINE: "fargate" })).toMatch(/^LLMHA_CAPACITY_ENGINE .*asg, karpenter/);
    expect(parseConfig([], { ...base, LLMHA_CAPACITY_ENGINE: "karpenter", LLMHA_STANDBY_NODEPOOLS: "pool-a=8,pool-b=8", LLMHA_STANDBY_PLACEHOLDER: "llm-ha/ph=1", LLMHA_STANDBY_SCHEDULE: "0 20 * * 1-5;0 7 * * 1-5" })).toMatchObject({
      capacityEngine: "karpenter", standbyNodepools: "pool-a=8,pool-b=8", standbyPlaceholder: "llm-ha/ph=1", standbyScheduleTz: "UTC",
    });
  });
});
