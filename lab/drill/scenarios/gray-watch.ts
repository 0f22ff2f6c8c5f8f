/**
 * What the gray-failure scenarios watch beside the observer: the registry read straight from Redis
 * as the lab admin (through the endpoint, never over a node's path, so a slowed or cut path
 * does not slow the watch) — node hashes that expired and how late heartbeats ran — and the
 * lease holder's changes over a window.
 */
import { recordKeys } from "../record-keys";
import { Redis } from "ioredis";
import { sleep } from "../../../agent/src/util/net";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import type { FleetSample } from "../timeline";
import type { ScenarioContext } from "./runner";

export interface RegistryWatch {
  /**
   * Running nodes whose hash was there at one sample and missing at a later one (expired:
   * heartbeats stopped reaching Redis). A node never seen — a standby node still booting, whose
   * agent has not written its first heartbeat — has not expired.
   */
  expired: string[];
  /** Oldest heartbeat seen (Redis clock minus the node's score in `nodes`), ms. */
  maxHeartbeatAgeMs: number;
  samples: number;
}

/** Polls every `everyMs` until stopped; `ignore` lists nodes expected to expire (a victim cut from Redis). */
export function watchRegistry(ctx: ScenarioContext, o: { everyMs?: number; ignore?: readonly string[] } = {}): { stop(): Promise<RegistryWatch> } {
  const keys = new RedisKeys(ctx.stack.cluster);
  const r = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 500, commandTimeout: 500, retryStrategy: () => 100 });
  r.on("error", () => undefined);
  const out: RegistryWatch = { expired: [], maxHeartbeatAgeMs: 0, samples: 0 };
  const seen = new Set<string>();
  let on = true;
  const loop = (async () => {
    while (on) {
      try {
        const ids = ctx.stack.running().map((n) => n.id).filter((id) => !o.ignore?.includes(id));
        const records = await recordKeys(r, keys, ids);
        const p = r.pipeline().time();
        ids.forEach((id, i) => p.exists(records[i]).zscore(keys.nodes, id));
        const res = (await p.exec()) ?? [];
        const [sec, usec] = (res[0]?.[1] as [string, string] | undefined) ?? ["0", "0"];
        const nowMs = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
        ids.forEach((id, i) => {
          const present = res[1 + 2 * i]?.[1] === 1;
          if (present) seen.add(id);
          else if (seen.has(id) && !out.expired.includes(id)) out.expired.push(id);
          const score = Number(res[2 + 2 * i]?.[1]);
          if (Number.isFinite(score) && score > 0) out.maxHeartbeatAgeMs = Math.max(out.maxHeartbeatAgeMs, nowMs - score);
        });
        out.samples++;
      } catch {
        // the endpoint may be moving: the next sample counts
      }
      await sleep(o.everyMs ?? 250);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      r.disconnect();
      return out;
    },
  };
}

/** Times the lease changed holder (a holder to another, or to none and back to another) in [from, until]. */
export function leaderChanges(fleet: readonly FleetSample[], from: number, until: number): number {
  let last: string | null | undefined;
  let n = 0;
  for (const f of fleet) {
    if (f.t < from || f.t > until || f.leader === undefined || f.leader === null) continue;
    if (last !== undefined && last !== f.leader) n++;
    last = f.leader;
  }
  return n;
}
