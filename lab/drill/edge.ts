/**
 * The drill's public edge, as an L1 pod runs it: client keys in the drill's Redis (one
 * tenant per client class), `EdgeSync` copying them into every AZ proxy's map through its
 * admin socket, and the 413 sink. The AZ proxies render the same edge as production.
 */
import { join } from "node:path";
import { Redis } from "ioredis";
import type { HaproxyEdge } from "../../contracts/haproxy-edge";
import { KeyStore } from "../../agent/src/edge/keys/keys";
import { EdgeSync } from "../../agent/src/edge/keys/sync";
import { startEdgeSink, type EdgeSink } from "../../agent/src/edge/keys/sink";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { createLogger } from "../../agent/src/util/log";
import { DRILL_TENANTS, setDrillKey } from "./credentials";

/** Generous limits for the drill's own tenants: the edge must not shape what the drill measures. */
export const DRILL_TENANT_LIMITS = Object.freeze({ rps: 100_000, concurrency: 100_000 });
/** The body limit of the drill's proxies (production's default). */
export const DRILL_MAX_BODY = 8 * 1024 * 1024;
/** How often the drill's sync polls the store (production: 1 s). */
export const DRILL_EDGE_SYNC_MS = 250;

export interface DrillEdge {
  config: HaproxyEdge;
  store: KeyStore;
  sync: EdgeSync;
  sink: EdgeSink;
  /** Stores the client classes' keys again from a backup taken at start (an operator after Redis lost its data). */
  reseed(): Promise<void>;
}

export async function startDrillEdge(
  o: { dir: string; progress(line: string): void; track(stop: () => Promise<void>): void },
  redisUrl: string,
  cluster: string,
  sockets: () => string[],
): Promise<DrillEdge> {
  const client = new Redis(redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2 });
  client.on("error", () => undefined); // Redis scenarios take it away; the sync retries
  const keys = new RedisKeys(cluster);
  const store = new KeyStore(client, keys);
  for (const t of DRILL_TENANTS) setDrillKey(t, (await store.add(`drill-${t}`, DRILL_TENANT_LIMITS, "the drill's client class")).key);
  // The stored records as an operator's backup: restored as they are, the clients' keys stay valid.
  const backup = await client.hgetall(keys.edgeKeys);
  const seed = async (): Promise<void> => {
    await client.hset(keys.edgeKeys, backup);
    await client.incr(keys.edgeKeysRev);
  };
  const sink = await startEdgeSink({ host: "127.0.0.1", port: 0, maxBodyBytes: DRILL_MAX_BODY });
  const mapPath = join(o.dir, "edge-keys.map");
  const sync = new EdgeSync({ redis: client, keys, sockets, mapPath, log: createLogger({ level: "silent" }), periodMs: DRILL_EDGE_SYNC_MS });
  // The map file exists before any proxy starts (HAProxy refuses a missing map).
  await sync.pass(true);
  o.progress(`edge: ${DRILL_TENANTS.length} tenants' keys in Redis, map ${mapPath}, 413 sink on 127.0.0.1:${sink.port}`);
  o.track(async () => {
    sync.stop();
    await sink.close();
    client.disconnect();
  });
  return { config: { keysMap: mapPath, maxBodyBytes: DRILL_MAX_BODY, sinkAddress: `127.0.0.1:${sink.port}` }, store, sync, sink, reseed: seed };
}
