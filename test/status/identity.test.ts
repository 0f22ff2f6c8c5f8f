/**
 * `llm-ha status` with node identities on, on a real redis-server with the rendered ACL file:
 * three agents (`llmha-agent`) enrol with projected-token-shaped JWTs and heartbeat under their
 * capability keys; the leader's enrolment desk (`llmha-controller`) publishes a digest per node.
 * Status, as `llmha-reader` (which may not read `llmha-caps:`), shows each node from the record
 * under its capability key, and shows what an attacker wrote with the shared agent credential
 * under `node:<id>:<other>` and `node:<id>` as records the leader does not read, never as the node.
 * `llm-ha canary record` reads the nodes' own answers the same way.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EnrolmentDesk } from "../../agent/src/fleet/identity/desk";
import { Enrolment } from "../../agent/src/fleet/identity/enrol";
import { recordDigest } from "../../agent/src/fleet/identity/identity";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { NodeRegistry, type NodeReport } from "../../agent/src/fleet/redis/registry";
import { publishAnswers, readNodeAnswers } from "../../agent/src/node/canary/store";
import { renderFleetView } from "../../agent/src/ops/status/render";
import { readFleetView } from "../../agent/src/ops/status/view";
import type { Decision } from "../../agent/src/types";
import { testLogger } from "../redis/helpers";
import { identityRedis } from "../support/identity-redis";
import { TEST_ISSUER } from "../support/test-issuer";

const log = testLogger();
const NODES = [
  { nodeId: "a1", az: "az-a", status: "HEALTHY" as const },
  { nodeId: "a2", az: "az-a", status: "DEGRADED" as const },
  { nodeId: "b1", az: "az-b", status: "HEALTHY" as const },
];
const env = identityRedis("statid");
const as = (role: Parameters<typeof env.as>[0]) => env.as(role);

function report(n: (typeof NODES)[number]): NodeReport {
  const now = Date.now();
  const weight = n.status === "HEALTHY" ? 100 : 50;
  const decision: Decision = { status: n.status, phase: "serving", weight, reasons: n.status === "HEALTHY" ? [] : [{ code: "PROBE_SLOW", severity: "soft", detail: "slow" }] as never, pending: [], suppressed: [], since: now, checkedAt: now, loadScore: 1 };
  return { nodeId: n.nodeId, az: n.az, decision, gpus: 8, gpusExpected: 8, model: "m" };
}

describe("llm-ha status with node identities", () => {
  it("shows each node from its capability record, and forged records as a count, never as the node; canary record reads the same records", async () => {
    const keys = new RedisKeys(env.acl.cluster);
    const ctl = await as("llmha-controller");
    const lease = new LeaderLease({ redis: ctl.redis, keys, holderId: "statid-leader", settings: { ttlMs: 30_000, renewMs: 3000, contendMs: 200, marginMs: 1000 }, log });
    env.track(lease);
    lease.start();
    await waitFor("leader", () => lease.isLeader, { timeoutMs: 5000 });
    const writer = new FencedWriter(ctl.redis, keys, lease);
    const desk = new EnrolmentDesk({ redis: ctl.redis, keys, jwks: async () => env.jwks, issuer: TEST_ISSUER, log });
    await desk.load();
    const registries: NodeRegistry[] = [];
    for (const n of NODES) {
      writeFileSync(join(env.dir, `${n.nodeId}.token`), await env.tokenOf(n.nodeId));
      const agent = await as("llmha-agent");
      registries.push(new NodeRegistry({ client: agent, keys, log, settings: { intervalMs: 1000, ttlPeriods: 30 }, identity: new Enrolment({ redis: agent.redis, keys, nodeId: n.nodeId, tokenFile: join(env.dir, `${n.nodeId}.token`), log, pollMs: 50 }) }));
    }
    // Each agent enrols (the desk answers) and heartbeats under its own key.
    const beats = registries.map((reg, i) => reg.heartbeat(report(NODES[i])));
    // The desk answers the enrolments as they arrive (on a loaded machine an agent's may come late).
    let accepted = 0;
    for (const until = Date.now() + 20_000; accepted < NODES.length && Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 100));
      accepted += (await desk.process(new Set(NODES.map((n) => n.nodeId)), writer)).accepted;
    }
    expect(accepted).toBe(NODES.length);
    await Promise.all(beats);
    for (let i = 0; i < registries.length; i++) await registries[i].heartbeat(report(NODES[i]));

    const reader = await as("llmha-reader");
    // The reader reaches neither the capabilities nor, therefore, the record keys by name.
    await expect(reader.redis.hgetall(keys.capabilities)).rejects.toThrow(/NOPERM|no permissions/);
    // The digests are the leader's: the agent role may not write them.
    const evil = await as("llmha-agent");
    await expect(evil.redis.hset(keys.recordDigests, "b1", "0000000000000000")).rejects.toThrow(/NOPERM|no permissions/);
    await expect(evil.redis.hgetall(keys.recordDigests)).rejects.toThrow(/NOPERM|no permissions/);
    // A fenced leader write: the hash also carries the writing term's token, holder and time.
    const nodeFields = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).filter(([k]) => !["token", "leader", "at"].includes(k)));
    const written = await reader.redis.hgetall(keys.recordDigests);
    expect(written).toMatchObject({ leader: "statid-leader", token: expect.stringMatching(/^\d+$/) });
    const digests = nodeFields(written);
    expect(Object.keys(digests).sort()).toEqual(["a1", "a2", "b1"]);
    // What is published is a digest, not the capability.
    const caps = await ctl.redis.hgetall(keys.capabilities);
    for (const n of NODES) {
      expect(digests[n.nodeId]).toBe(recordDigest(caps[n.nodeId]));
      expect(Object.values(digests)).not.toContain(caps[n.nodeId]);
    }

    // A new leader's term publishes them again (one of an older version published none).
    await ctl.redis.del(keys.recordDigests);
    const next = new EnrolmentDesk({ redis: ctl.redis, keys, jwks: async () => env.jwks, issuer: TEST_ISSUER, log });
    await next.load();
    await next.process(new Set(NODES.map((n) => n.nodeId)), writer);
    expect(nodeFields(await reader.redis.hgetall(keys.recordDigests))).toEqual(digests);

    // The leader's inventory (a fenced hash, as the controller writes it each period): the nodes status shows.
    await writer.hset(keys.inventory, Object.fromEntries(NODES.map((n) => [n.nodeId, `${n.az}|8|1`])), { mode: "replace" });
    const byId = (v: Awaited<ReturnType<typeof readFleetView>>) => Object.fromEntries(v.azs.flatMap((a) => a.nodes).map((n) => [n.id, n]));
    const clean = await readFleetView(reader.redis, keys);
    expect(Object.fromEntries(Object.entries(byId(clean)).map(([id, n]) => [id, [n.az, n.status, n.weight, n.alive, n.model]]))).toEqual({
      a1: ["az-a", "HEALTHY", 100, true, "m"],
      a2: ["az-a", "DEGRADED", 50, true, "m"],
      b1: ["az-b", "HEALTHY", 100, true, "m"],
    });
    expect(clean.identities).toEqual({ enrolled: 3, unboundRecords: 0, unboundNodes: [] });
    expect(clean.inventory).toEqual({ nodes: 3, notListed: 0, notListedNodes: [] });

    // The attacker, with the shared agent credential: b1's record under a made-up suffix and under plain `node:b1`, both failed.
    const forged = ["az-b", "UNHEALTHY", "down", "0", "0", "8", "", "GPU_LOST"].join("|");
    await evil.redis.hset(keys.nodeRecord("b1", "f".repeat(32)), "az", "az-b", "status", "UNHEALTHY", "weight", "0", "loadScore", "999", "model", "evil", "c", forged);
    await evil.redis.hset(keys.node("b1"), "az", "az-b", "status", "UNHEALTHY", "weight", "0", "model", "evil", "c", forged);
    // A suffix that is b1's digest itself (what every agent can read) is not the capability either.
    await evil.redis.hset(keys.nodeRecord("b1", digests.b1), "az", "az-b", "status", "UNHEALTHY", "c", forged);
    // A phantom member in a made-up AZ, with a record of its own: the inventory does not list it.
    await evil.redis.hset(keys.members, "ghost-1", "az-z|64|1");
    await evil.redis.sadd(keys.azs, "az-z");
    await evil.redis.hset(keys.node("ghost-1"), "az", "az-z", "status", "UNHEALTHY", "c", ["az-z", "UNHEALTHY", "down", "0", "0", "64", "", "GPU_LOST"].join("|"));
    const attacked = await readFleetView(reader.redis, keys);
    expect([byId(attacked).b1.status, byId(attacked).b1.weight, byId(attacked).b1.model, byId(attacked).b1.alive]).toEqual(["HEALTHY", 100, "m", true]);
    expect(attacked.identities).toEqual({ enrolled: 3, unboundRecords: 4, unboundNodes: ["b1", "ghost-1"] });
    expect(Object.keys(byId(attacked)).sort()).toEqual(["a1", "a2", "b1"]);
    expect(attacked.azs.map((a) => a.az)).toEqual(["az-a", "az-b"]);
    expect(attacked.inventory).toEqual({ nodes: 3, notListed: 1, notListedNodes: ["ghost-1"] });
    const text = renderFleetView(attacked, { color: false, width: 200 }).join("\n");
    expect(text).toMatch(/identity +3 nodes under their own record key +4 records under keys the leader does not read \(forged, or stale\): b1, ghost-1/);
    expect(text).toMatch(/nodes +3 listed by the leader's inventory \(the nodes shown\) +1 member it does not list \(forged, or nodes gone\), not shown: ghost-1/);

    // canary record reads each node's answers from its own record; the shared hash and the forged record are not read.
    const at = Date.now();
    const answer = (text: string) => ({ p1: { text, tokens: text.split(" "), logprobs: null } });
    for (const n of NODES) await publishAnswers(evil.redis, keys, { nodeId: n.nodeId, az: n.az, model: "m", at, answers: answer("wrong") });
    await evil.redis.hset(keys.nodeRecord("b1", "f".repeat(32)), "canary", JSON.stringify({ az: "az-b", model: "m", at, answers: answer("wrong") }));
    const admin = await env.asAdmin();
    for (const n of NODES) await publishAnswers(admin.redis, keys, { nodeId: n.nodeId, az: n.az, model: "m", at, answers: answer("right") }, keys.nodeRecord(n.nodeId, caps[n.nodeId]));
    const operator = await as("llmha-operator");
    const read = await readNodeAnswers(operator.redis, keys, at, 60_000);
    expect(read.map((n) => [n.nodeId, n.answers.p1?.text]).sort()).toEqual([["a1", "right"], ["a2", "right"], ["b1", "right"]]);
  });
});
