/**
 * Enrolment is a fenced leader write. A leader deposed while it judges (a newer term began: its
 * token is no longer the highest) must not hand out a capability: its write landed, unfenced,
 * after the new leader had read the capabilities at the start of its term, and the node then
 * heartbeated under a key that leader never read (the node shown as gone). On a real
 * redis-server with the rendered ACL file, as `llmha-controller` and `llmha-agent`.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EnrolmentDesk } from "../../agent/src/fleet/identity/desk";
import { Enrolment } from "../../agent/src/fleet/identity/enrol";
import { FencedWriter } from "../../agent/src/fleet/redis/fenced";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { LeaderLease } from "../../agent/src/fleet/redis/lease";
import { waitFor } from "../../agent/src/util/net";
import { testLogger } from "../redis/helpers";
import { identityRedis } from "../support/identity-redis";
import { TEST_ISSUER } from "../support/test-issuer";

const log = testLogger();
const env = identityRedis("enrolfence");
const as = env.as.bind(env);

async function leaderAs(holderId: string): Promise<{ lease: LeaderLease; writer: FencedWriter; desk: EnrolmentDesk }> {
  const ctl = await as("llmha-controller", holderId);
  const keys = new RedisKeys(env.acl.cluster);
  const lease = new LeaderLease({ redis: ctl.redis, keys, holderId, settings: { ttlMs: 2000, renewMs: 500, contendMs: 100, marginMs: 300 }, log });
  env.track(lease);
  lease.start();
  await waitFor(`${holderId} leads`, () => lease.isLeader, { timeoutMs: 10_000 });
  const desk = new EnrolmentDesk({ redis: ctl.redis, keys, jwks: async () => env.jwks, issuer: TEST_ISSUER, log });
  await desk.load();
  return { lease, writer: new FencedWriter(ctl.redis, keys, lease), desk };
}

describe("enrolment under a deposed leader", () => {
  it("hands out nothing once a newer term began: the request waits for the new leader, whose capability the node then uses", async () => {
    const keys = new RedisKeys(env.acl.cluster);
    const old = await leaderAs("old-leader");
    const oldToken = old.lease.current!.token;
    // The old leader's process stalls (a GC pause, a partition): it stops renewing, its lease runs
    // out and a new leader takes the next term (its acquisition raises the fence).
    old.lease.abandon();
    const fresh = await leaderAs("new-leader");
    expect(fresh.lease.current!.token).toBeGreaterThan(oldToken);

    // Node a1 asks to enrol.
    const agent = await as("llmha-agent", "agent-a1");
    writeFileSync(join(env.dir, "a1.token"), await env.tokenOf("a1"));
    const enrolment = new Enrolment({ redis: agent.redis, keys, nodeId: "a1", tokenFile: join(env.dir, "a1.token"), log, pollMs: 50 });
    const enrolled = enrolment.enrol(10_000);
    const ctl = await as("llmha-controller", "judge");
    await waitFor("a1's request", async () => (await ctl.redis.xrange(keys.enrol, "-", "+")).length === 1, { timeoutMs: 5000 });
    const inventory = new Set(["a1"]);

    // The old leader resumes, still holding its term's token, and judges the request.
    let steppedDown = false;
    const resumed = { current: { token: oldToken }, holderId: "old-leader", observeToken: () => undefined, stepDown: () => (steppedDown = true) };
    const stale = new FencedWriter(ctl.redis, keys, resumed as unknown as LeaderLease);
    expect(await old.desk.process(inventory, stale)).toEqual({ accepted: 0, refused: 0, waiting: 0 });
    // Redis refused its first write: it steps down, nothing of the enrolment is written, the request waits.
    expect(steppedDown).toBe(true);
    expect(stale.rejected).toBe(1);
    expect(await ctl.redis.hget(keys.capabilities, "a1")).toBeNull();
    expect(await ctl.redis.hget(keys.enrolled, "a1")).toBeNull();
    expect((await ctl.redis.xrange(keys.enrol, "-", "+")).length).toBe(1);

    // The new leader judges it: one capability, the key the node then heartbeats under.
    expect((await fresh.desk.process(inventory, fresh.writer)).accepted).toBe(1);
    expect(await enrolled).toBe(fresh.desk.recordKey("a1"));
    expect((await ctl.redis.xrange(keys.enrol, "-", "+")).length).toBe(0);
  });
});
