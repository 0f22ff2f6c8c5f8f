/**
 * `llm-ha status` shows the repair ladder's plan: each advised action per node, held nodes
 * with the reason a bound holds them, quarantined hosts; `--json` carries the same; a
 * `repair.advised` event reads as a sentence.
 */
import { describe, expect, it } from "vitest";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { encodePlanEntry, PLAN_META } from "../../agent/src/fleet/repair/plan";
import { eventRow } from "../../agent/src/ops/status/events";
import { renderFleetView } from "../../agent/src/ops/status/render";
import { repairsView } from "../../agent/src/ops/status/repairs";
import type { FleetView } from "../../agent/src/ops/status/types";

const NOW = 1_800_000_000_000;
const keys = new RedisKeys("prod");

/** The hash as the leader publishes it (fleet/repair/advise.ts). */
const plan: Record<string, string> = {
  [PLAN_META.updatedAt]: String(NOW - 2000),
  [PLAN_META.mode]: "advise",
  [PLAN_META.quarantined]: "i-0bad",
  token: "42", leader: "c1/7", at: String(NOW - 2000),
  a2: encodePlanEntry({ action: "reboot", wanted: "reboot", reason: "XID 79: a GPU fell off the bus", since: NOW - 180_000, host: "i-0a2", az: "us-east-1a", fault: "off-bus" }),
  a3: encodePlanEntry({ action: "held", wanted: "replace", reason: "replace held: no replacement in sight in us-east-1a (no free reservation slot, standby node or fallback path) (row remapping failed: no spare rows left)", since: NOW - 2_400_000, host: "i-0a3", az: "us-east-1a", fault: "remap-failure", bound: "replacement" }),
  b1: encodePlanEntry({ action: "none", wanted: null, reason: "no repair needed", since: NOW, host: "b1", az: "us-east-1b", fault: "off-bus" }),
  junk: "not json",
};

function view(over: Partial<FleetView> = {}): FleetView {
  return {
    version: 1, cluster: "prod", redis: "redis://redis:6379", now: NOW,
    leader: { holder: "c1/7", token: 42, ttlMs: 15_500, highestToken: 42, highestHolder: "c1/7" },
    tier: null, standby: null, actuation: null, fallback: { l4: false, queue: null }, suspect: null,
    azs: [], events: [], empty: false, ...over,
  };
}

describe("status: the repair plan", () => {
  it("reads the published hash into advised, held and quarantined", () => {
    const r = repairsView(plan, NOW, 30_000)!;
    expect(r).toMatchObject({ mode: "advise", ageMs: 2000, stale: false, quarantined: ["i-0bad"] });
    expect(r.advised.map((x) => [x.nodeId, x.action, x.host])).toEqual([["a2", "reboot", "i-0a2"]]);
    expect(r.held).toEqual([expect.objectContaining({ nodeId: "a3", action: "held", wanted: "replace", bound: "replacement", ageMs: 2_400_000 })]);
    expect(repairsView({}, NOW, 30_000)).toBeNull();
    expect(repairsView(plan, NOW + 60_000, 30_000)?.stale).toBe(true);
  });

  it("renders each advised action, each held node with its reason, the quarantined hosts; JSON carries the same", () => {
    const v = view({ repairs: repairsView(plan, NOW, 30_000) });
    const lines = renderFleetView(v, { width: 400 });
    const head = lines.find((l) => l.startsWith("repairs"))!;
    expect(head).toContain("advise: nothing is done");
    expect(head).toContain("1 advised, 1 held, quarantined hosts i-0bad");
    expect(lines.find((l) => l.startsWith("  a2 "))).toMatch(/a2 \(us-east-1a, i-0a2\)\s+reboot\s+XID 79: a GPU fell off the bus\s+since 3m ago/);
    expect(lines.find((l) => l.startsWith("  a3 "))).toMatch(/held, needs replace\s+replace held: no replacement in sight in us-east-1a/);
    expect(lines.some((l) => l.includes("b1"))).toBe(false);
    for (const l of renderFleetView(v)) expect([...l].length).toBeLessThanOrEqual(100);
    const json = JSON.parse(JSON.stringify(v)) as FleetView;
    expect(json.repairs?.advised[0]).toMatchObject({ nodeId: "a2", action: "reboot", reason: "XID 79: a GPU fell off the bus" });
    expect(json.repairs?.held[0]).toMatchObject({ nodeId: "a3", wanted: "replace", bound: "replacement" });
    expect(json.repairs?.quarantined).toEqual(["i-0bad"]);
  });

  it("act mode: a repair under way shows its step, how long it has been at it and what it last did; a failed one in red", () => {
    const actPlan = { ...plan, [PLAN_META.mode]: "act", a2: encodePlanEntry({ action: "replace", wanted: "replace", reason: "replace under way since …", since: NOW - 300_000, host: "i-0a2", az: "us-east-1a", fault: "remap-failure", bound: "in-progress" }) };
    const active = {
      a2: JSON.stringify({ action: "replace", step: "replacement", since: NOW - 120_000, startedAt: NOW - 300_000, token: 42, host: "i-0a2", az: "us-east-1a", fault: "remap-failure", detail: "eks-gpu-a desired 2→3 to replace i-0a2", surged: true, healthyBefore: 1 }),
      a3: JSON.stringify({ action: "reboot", step: "failed", failedStep: "drain", since: NOW - 60_000, startedAt: NOW - 90_000, token: 42, host: "i-0a3", az: "us-east-1a", fault: "off-bus", detail: "not drained in 600 s" }),
      token: "42",
    };
    const r = repairsView(actPlan, NOW, 30_000, active)!;
    expect(r.advised[0].step).toEqual({ name: "replacement", ageMs: 120_000, detail: "eks-gpu-a desired 2→3 to replace i-0a2" });
    expect(r.held[0].step).toEqual({ name: "failed at drain", ageMs: 60_000, detail: "not drained in 600 s" });
    const lines = renderFleetView(view({ repairs: r }), { width: 400 });
    expect(lines.find((l) => l.startsWith("repairs"))).toContain("act: the plan is carried out");
    expect(lines.find((l) => l.startsWith("  a2 "))).toMatch(/replace\s+replace under way since …\s+since 5m ago\s+step replacement since 2m ago: eks-gpu-a desired 2→3 to replace i-0a2/);
    expect(lines.find((l) => l.startsWith("  a3 "))).toContain("step failed at drain since 60s ago: not drained in 600 s");
    expect(repairsView(plan, NOW, 30_000)!.advised[0].step).toBeUndefined();
  });

  it("says so when no plan is published, and when no node needs a repair", () => {
    expect(renderFleetView(view({ repairs: null })).find((l) => l.startsWith("repairs"))).toContain("no plan published (LLMHA_REPAIR_MODE off");
    const none = repairsView({ [PLAN_META.updatedAt]: String(NOW), [PLAN_META.mode]: "advise" }, NOW, 30_000);
    expect(renderFleetView(view({ repairs: none })).find((l) => l.startsWith("repairs"))).toContain("no GPU node needs a repair");
    expect(renderFleetView(view()).some((l) => l.startsWith("repairs"))).toBe(false);
  });

  it("a repair.advised event reads as a sentence", () => {
    const e = eventRow(`${NOW - 1000}-0`, ["type", "repair.advised", "key", keys.repairPlan, "from", "", "token", "42", "leader", "c1/7", "a2", plan.a2], NOW, keys);
    expect(e).toMatchObject({ type: "repair.advised", tone: "warn", summary: "repair advised for a2 (us-east-1a): reboot: XID 79: a GPU fell off the bus" });
    const held = eventRow(`${NOW}-0`, ["type", "repair.advised", "key", keys.repairPlan, "from", plan.a2, "token", "42", "leader", "c1/7", "a3", plan.a3], NOW, keys);
    expect(held.tone).toBe("bad");
    expect(held.summary).toContain("held, needs replace");
  });

  it("act mode's repair.started, repair.done and repair.failed events read as sentences", () => {
    const ev = (type: string, entry: object) => eventRow(`${NOW}-0`, ["type", type, "key", keys.repairActive, "from", "", "token", "42", "leader", "c1/7", "a2", JSON.stringify(entry)], NOW, keys);
    expect(ev("repair.started", { action: "restart", step: "drain", detail: "a2 unschedulable" })).toMatchObject({ tone: "warn", summary: "repair restart of a2: step drain: a2 unschedulable" });
    expect(ev("repair.done", { action: "reboot", step: "done", detail: "HEALTHY again" })).toMatchObject({ tone: "ok", summary: "repair reboot of a2: done, the node is back: HEALTHY again" });
    expect(ev("repair.failed", { action: "restart", step: "failed", failedStep: "drain", detail: "HTTP 500" })).toMatchObject({ tone: "bad", summary: "repair restart of a2: failed at drain, the node stays cordoned: HTTP 500" });
  });
});
