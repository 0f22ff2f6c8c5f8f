/**
 * What the last leader published, read back by a new one so that its hysteresis, a standby it
 * woke, a zonal shift it started and a practice under way go on instead of starting over.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../redis/keys";
import { emptyPracticeMemory, type PracticeMemory } from "../actuators/practice";
import { AZ_STATES, emptyControllerMemory, type AzState, type ControllerMemory } from "./state";

export async function readPublished(redis: Redis, keys: RedisKeys, azs: readonly string[]): Promise<{ memory: ControllerMemory; practice: PracticeMemory }> {
  const mem = emptyControllerMemory();
  const p = redis.pipeline();
  for (const az of azs) p.hgetall(keys.azState(az));
  p.hgetall(keys.standbyWake);
  p.hgetall(keys.actuation);
  p.hgetall(`${keys.prefix}practice`);
  const rs = (await p.exec()) ?? [];
  // A read that failed inside the pipeline fails the whole seed (tried again), not one AZ read as unpublished.
  const failed = rs.find(([err]) => err);
  if (failed) throw failed[0] as Error;
  azs.forEach((az, i) => {
    const h = (rs[i]?.[1] ?? {}) as Record<string, string>;
    if ((AZ_STATES as readonly string[]).includes(h.state)) {
      const since = Number(h.since ?? Date.now());
      // States published before `firstSeen`/`everOk` existed: an OK state proves it was OK once.
      mem.az.set(az, { state: h.state as AzState, better: 0, since, firstSeen: Number(h.firstSeen ?? since), everOk: h.everOk === "1" || h.state === "OK" });
    }
  });
  const sb = (rs[azs.length]?.[1] ?? {}) as Record<string, string>;
  if (sb.wake === "1") mem.standby = { wake: true, lastTriggerAt: Number(sb.lastTriggerAt ?? Date.now()) };
  // A shift the previous leader started is kept (and cancelled in time) rather than forgotten until it expires.
  const act = (rs[azs.length + 1]?.[1] ?? {}) as Record<string, string>;
  if (act.shiftAz) mem.shift = { az: act.shiftAz, since: Number(act.shiftSince ?? Date.now()), okSince: null };
  // A practice the previous leader started goes on (its start kept); a firing it acted on is not acted on again.
  const pr = (rs[azs.length + 2]?.[1] ?? {}) as Record<string, string>;
  return { memory: mem, practice: { ...emptyPracticeMemory(Number(pr.firedAt) || 0), startedAt: Number(pr.startedAt) || null } };
}
