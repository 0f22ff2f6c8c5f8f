/**
 * Operator commands of the public edge:
 *   `llm-ha keys add|list|revoke|rotate` — client API keys (Redis, by hash only);
 *   `llm-ha edge-sync` — the L1 pod's loop that copies them into HAProxy's map.
 * Both take the fleet flags of `llm-ha status` (`--redis-url`, `--cluster`, `--redis-ca-file`).
 */
import { parseArgs } from "node:util";
import { CONNECT_TIMEOUT_MS, explainContact, FLAG_ALIASES, FLEET_FLAGS, firstContact, jsonWanted, openFleetRedis } from "./status/command";
import { flagErrorMessage } from "../../../contracts/did-you-mean";
import { createLogger, safeUrl } from "../util/log";
import { DEFAULT_KEY_LIMITS, DEFAULT_ROTATION_OVERLAP_MS, keyExpired, KeyStore, KeyStoreError, type StoredKey } from "../edge/keys/keys";
import { EdgeSync, mapFileText, writeAtomic } from "../edge/keys/sync";
import { startEdgeSink } from "../edge/keys/sink";
import { EDGE_DEFAULTS } from "../../../contracts/haproxy-edge";

export const KEYS_USAGE = `Usage: llm-ha keys COMMAND [flags]

Client API keys of the public edge (L1). A key is printed once, when it is made; Redis
keeps only its SHA-256. Changes reach every L1 proxy within a second (llm-ha edge-sync),
without a reload.

  add --tenant T [--rps N] [--concurrency N] [--note TEXT]
                      a new key for tenant T (defaults: --rps ${DEFAULT_KEY_LIMITS.rps}, --concurrency ${DEFAULT_KEY_LIMITS.concurrency})
  list [--json|-o json]  every key: id, tenant, limits, age (never the key)
  rotate ID [--overlap DURATION]
                      a new key with the same tenant and limits; the old one keeps working for
                      the overlap (default 24h; e.g. 90s, 30m, 24h, 7d), then expires
  revoke ID           the key stops working within a second

Fleet flags: --redis-url URL (default $LLMHA_REDIS_URL), --cluster NAME, --redis-ca-file PATH
Exit codes: 0 done, 1 Redis unreachable, 2 bad flags, 3 no such key.
`;

export const EDGE_SYNC_USAGE = `Usage: llm-ha edge-sync --map PATH --socket PATH [--socket PATH…] [flags]

Keeps the client-key map of the L1 proxies equal to the key store in Redis (runtime API:
no reload, no connection dropped). Runs beside HAProxy in the L1 pod.

  --map PATH        the map file HAProxy loads (default $LLMHA_EDGE_MAP)
  --socket PATH     HAProxy's map socket (stats socket … level user: map changes only);
                    repeat for several (default $LLMHA_EDGE_SOCKET)
  --interval MS     poll period (default 1000)
  --sink ADDR       host:port of the 413 answerer HAProxy sends oversized requests to
                    (default $LLMHA_EDGE_SINK; none when unset)
  --max-body BYTES  the limit the 413 names (default 8388608)
  --once            write the map file from Redis and exit (an init container: an empty map
                    when Redis cannot be reached within 5 s, so HAProxy can start)
Fleet flags: --redis-url URL, --cluster NAME, --redis-ca-file PATH
`;

/** Splits argv into the fleet flags (for `openFleetRedis`) and the rest. */
function splitFleet(argv: string[]): { fleet: string[]; rest: string[] } {
  const fleet: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const name = a.split("=")[0];
    if ((FLEET_FLAGS as readonly string[]).includes(name) || name in FLAG_ALIASES) {
      fleet.push(a);
      if (!a.includes("=") && i + 1 < argv.length) fleet.push(argv[++i]);
    } else rest.push(a);
  }
  return { fleet, rest };
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : s < 172_800 ? `${Math.round(s / 3600)}h` : `${Math.round(s / 86_400)}d`;
}

/** When a key expires, as `llm-ha keys list` shows it: `-` (never), `in 3h`, `expired`. */
export function expiryText(k: Pick<StoredKey, "expiresAt">, now = Date.now()): string {
  if (k.expiresAt === undefined) return "-";
  return keyExpired(k, now) ? "expired" : `in ${age(k.expiresAt - now)}`;
}

function keyLine(k: StoredKey): string {
  return `${k.id.padEnd(12)} ${k.tenant.padEnd(20)} ${String(k.rps).padStart(6)} ${String(k.concurrency).padStart(6)}  ${age(Date.now() - k.createdAt).padStart(5)}  ${expiryText(k).padEnd(9)}  ${k.note}`;
}

/** `--overlap`: `90s`, `30m`, `24h`, `7d` (or plain seconds), at most 365 days. */
export function parseOverlap(v: string | undefined): number {
  if (v === undefined) return DEFAULT_ROTATION_OVERLAP_MS;
  const m = /^(\d{1,9})(s|m|h|d)?$/.exec(v);
  const ms = m ? Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? "s") as "s" | "m" | "h" | "d"] : NaN;
  if (!Number.isFinite(ms) || ms > 365 * 86_400_000) throw new KeysUsageError(`--overlap must be a duration like 90s, 30m, 24h or 7d (at most 365d), got ${JSON.stringify(v)}`);
  return ms;
}

class KeysUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KeysUsageError";
  }
}

function whole(flag: string, v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 1_000_000) throw new KeysUsageError(`${flag} must be a whole number from 1 to 1000000, got ${JSON.stringify(v)}`);
  return Number(v);
}

export async function keysCommand(argv: string[]): Promise<number> {
  const err = (line: string): void => void process.stderr.write(`llm-ha keys: ${line}\n`);
  const { fleet, rest } = splitFleet(argv);
  let values: { tenant?: string; rps?: string; concurrency?: string; note?: string; overlap?: string; json?: boolean; output?: string; help?: boolean };
  let positionals: string[];
  const options = {
    tenant: { type: "string" },
    rps: { type: "string" },
    concurrency: { type: "string" },
    note: { type: "string" },
    overlap: { type: "string" },
    json: { type: "boolean" },
    output: { type: "string", short: "o" },
    help: { type: "boolean", short: "h" },
  } as const;
  let json: boolean;
  try {
    ({ values, positionals } = parseArgs({ args: rest, strict: true, allowPositionals: true, options }));
    json = jsonWanted(values, (m) => new KeysUsageError(m));
  } catch (e) {
    err(`${flagErrorMessage(e, [...Object.keys(options), ...FLEET_FLAGS.map((f) => f.slice(2))], FLAG_ALIASES)} (see llm-ha keys --help)`);
    return 2;
  }
  const [sub, id, ...extra] = positionals;
  if (values.help || sub === undefined || sub === "help") {
    (values.help || sub === "help" ? process.stdout : process.stderr).write(KEYS_USAGE);
    return values.help || sub === "help" ? 0 : 2;
  }
  let limits: typeof DEFAULT_KEY_LIMITS;
  let overlapMs: number;
  try {
    if (!["add", "list", "revoke", "rotate"].includes(sub)) throw new KeysUsageError(`unknown command ${JSON.stringify(sub)}: one of add, list, rotate, revoke`);
    if (sub === "add" && !values.tenant) throw new KeysUsageError("add needs --tenant");
    if ((sub === "revoke" || sub === "rotate") && !id) throw new KeysUsageError(`${sub} needs the key id (llm-ha keys list)`);
    if (extra.length || (sub !== "revoke" && sub !== "rotate" && id)) throw new KeysUsageError(`unexpected argument ${JSON.stringify(extra[0] ?? id)}`);
    limits = { rps: whole("--rps", values.rps, DEFAULT_KEY_LIMITS.rps), concurrency: whole("--concurrency", values.concurrency, DEFAULT_KEY_LIMITS.concurrency) };
    if (values.overlap !== undefined && sub !== "rotate") throw new KeysUsageError("--overlap goes with rotate");
    overlapMs = parseOverlap(values.overlap);
  } catch (e) {
    err(`${(e as Error).message} (see llm-ha keys --help)`);
    return 2;
  }
  const opened = openFleetRedis(fleet, "llmha-keys", err);
  if (typeof opened === "number") return opened;
  const { args, keys, client } = opened;
  try {
    const contact = await firstContact(client, CONNECT_TIMEOUT_MS);
    if (contact !== null) {
      err(`cannot reach Redis at ${safeUrl(args.redisUrl)}: ${await explainContact(args.redisUrl, contact)}`);
      return 1;
    }
    const store = new KeyStore(client.redis, keys);
    if (sub === "add" || sub === "rotate") {
      const made: { key: string; record: StoredKey; old?: StoredKey } = sub === "add" ? await store.add(values.tenant!, limits, values.note ?? "") : await store.rotate(id, overlapMs);
      if (json) process.stdout.write(JSON.stringify({ version: 1, key: made.key, id: made.record.id, tenant: made.record.tenant, rps: made.record.rps, concurrency: made.record.concurrency, ...(made.old ? { oldId: made.old.id, oldExpiresAt: made.old.expiresAt } : {}) }) + "\n");
      else {
        process.stdout.write(`${made.key}\n`);
        process.stderr.write(
          `key ${made.record.id} for tenant ${made.record.tenant} (${made.record.rps} req/s, ${made.record.concurrency} in flight); shown once, store it now` +
            (made.old ? `; the old key ${id} expires ${expiryText(made.old)} (\`llm-ha keys revoke ${id}\` ends it now)` : "") +
            "\n",
        );
      }
      return 0;
    }
    if (sub === "revoke") {
      if (!(await store.revoke(id))) {
        err(`no key with id ${JSON.stringify(id)} in cluster ${keys.cluster}`);
        return 3;
      }
      process.stdout.write(`key ${id} revoked; every L1 proxy refuses it within a second\n`);
      return 0;
    }
    const all = await store.list();
    if (json) process.stdout.write(JSON.stringify({ version: 1, cluster: keys.cluster, keys: all.map(({ hash: _h, ...k }) => k) }) + "\n");
    else process.stdout.write(`${"ID".padEnd(12)} ${"TENANT".padEnd(20)} ${"REQ/S".padStart(6)} ${"INFL".padStart(6)}  ${"AGE".padStart(5)}  ${"EXPIRES".padEnd(9)}  NOTE\n${all.map(keyLine).join("\n")}${all.length ? "\n" : ""}`);
    return 0;
  } catch (e) {
    if (e instanceof KeyStoreError) {
      err(e.message);
      return 2;
    }
    err(`Redis refused the change: ${(e as Error).message}`);
    return 1;
  } finally {
    await client.close();
  }
}

export async function edgeSyncCommand(argv: string[]): Promise<number> {
  const err = (line: string): void => void process.stderr.write(`llm-ha edge-sync: ${line}\n`);
  const { fleet, rest } = splitFleet(argv);
  let values: { map?: string; socket?: string[]; interval?: string; once?: boolean; help?: boolean; sink?: string; "max-body"?: string };
  const options = {
    map: { type: "string" },
    socket: { type: "string", multiple: true },
    interval: { type: "string" },
    once: { type: "boolean" },
    sink: { type: "string" },
    "max-body": { type: "string" },
    help: { type: "boolean", short: "h" },
  } as const;
  try {
    ({ values } = parseArgs({ args: rest, strict: true, allowPositionals: false, options }));
  } catch (e) {
    err(`${flagErrorMessage(e, [...Object.keys(options), ...FLEET_FLAGS.map((f) => f.slice(2))], FLAG_ALIASES)} (see llm-ha edge-sync --help)`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(EDGE_SYNC_USAGE);
    return 0;
  }
  const mapPath = values.map ?? process.env.LLMHA_EDGE_MAP;
  const sockets = values.socket ?? (process.env.LLMHA_EDGE_SOCKET ? process.env.LLMHA_EDGE_SOCKET.split(",") : []);
  let periodMs: number;
  let maxBody: number;
  const sinkAddr = values.sink ?? process.env.LLMHA_EDGE_SINK;
  try {
    if (sinkAddr !== undefined && !/^[A-Za-z0-9_.-]+:\d{1,5}$/.test(sinkAddr)) throw new KeysUsageError(`--sink ${JSON.stringify(sinkAddr)} must be host:port`);
    maxBody = whole("--max-body", values["max-body"], EDGE_DEFAULTS.maxBodyBytes);
    if (!mapPath) throw new KeysUsageError("no map file: pass --map or set LLMHA_EDGE_MAP");
    if (!values.once && sockets.length === 0) throw new KeysUsageError("no HAProxy map socket: pass --socket or set LLMHA_EDGE_SOCKET");
    periodMs = whole("--interval", values.interval, 1000);
  } catch (e) {
    err(`${(e as Error).message} (see llm-ha edge-sync --help)`);
    return 2;
  }
  const opened = openFleetRedis(fleet, "llmha-edge-sync", err);
  if (typeof opened === "number") return opened;
  const { args, keys, client } = opened;
  const log = createLogger({ name: "llm-ha-edge-sync" });
  const sync = new EdgeSync({ redis: client.redis, keys, sockets: values.once ? [] : sockets, mapPath, log, periodMs });
  if (values.once) {
    try {
      if ((await firstContact(client, 5000)) !== null) throw new KeysUsageError(`Redis at ${safeUrl(args.redisUrl)} not reachable within 5 s`);
      await sync.pass(true);
      log.info({ keys: sync.state.keys, map: mapPath }, "edge map written");
    } catch (e) {
      // HAProxy needs the file to start; an empty map refuses every key until the sync container fills it.
      writeAtomic(mapPath, mapFileText(new Map()));
      log.warn({ err: (e as Error).message, map: mapPath }, "edge map written empty; llm-ha edge-sync fills it once Redis answers");
    } finally {
      await client.close();
    }
    return 0;
  }
  const sink = sinkAddr ? await startEdgeSink({ host: sinkAddr.replace(/:\d+$/, ""), port: Number(sinkAddr.replace(/^.*:/, "")), maxBodyBytes: maxBody }) : null;
  sync.start();
  const stop = (): void => {
    sync.stop();
    void sink?.close();
    void client.close().then(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  log.info({ map: mapPath, sockets, redis: safeUrl(args.redisUrl) }, "edge-sync started");
  return -1;
}
