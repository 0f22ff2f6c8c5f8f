/**
 * `llm-ha status`: the fleet as Redis holds it — nodes per AZ, AZ states, leader and token,
 * tier, standby, suspect checks, the last events. One read and exit, `--watch` to redraw
 * until Ctrl-C, `--json` for scripts (docs/status.md).
 *
 * Exit codes: 0 shown; 1 Redis unreachable or failing; 2 bad flags; 3 nothing of this
 * cluster in Redis. Under `--watch` an outage or an empty cluster is a banner, not an exit.
 */
import { readFileSync } from "node:fs";
import type { ConnectionOptions } from "node:tls";
import { parseArgs } from "node:util";
import { flagErrorMessage } from "../../../../contracts/did-you-mean";
import { OutputFlagError, outputMode, terminalColumns } from "../../../../contracts/table";
import { createRedisClient, describeRedisError, RedisUrlError, speaksResp, type RedisClient } from "../../fleet/redis/client";
import { RedisKeys } from "../../fleet/redis/keys";
import { createLogger, safeUrl } from "../../util/log";
import { formatAge, missingAz, NODE_LISTINGS, renderBanner, renderFleetView, STATUS_WIDTH, type FleetRenderOptions, type NodeListing } from "./render";
import { findClusters, readFleetView, StatusReadError } from "./view";
import { STATUS_JSON_VERSION, type FleetView } from "./types";

export const STATUS_USAGE = `Usage: llm-ha status [flags]

Shows the fleet from Redis: nodes per AZ (status, weight, load, GPUs, heartbeat, reasons),
AZ states, leader and fencing token, tier level, standby, suspect checks, the rollout (while
one is active or ended within the hour), the last events.

  --redis-url URL   redis:// or rediss:// (default $LLMHA_REDIS_URL; required)
  --cluster NAME    key namespace (default $LLMHA_CLUSTER or "default")
  --redis-ca-file PATH  CA bundle for rediss:// (default $LLMHA_REDIS_CA_FILE)
  --events N        how many of the newest events (default 10, 0-1000)
  --json, -o json   one JSON document with a \`version\` (with --watch: one line per refresh),
                    also when the cluster is empty or Redis cannot be reached
  -o wide           every line whole (by default lines fit $COLUMNS, else the terminal,
                    else 100 columns, long reasons ending in "…")
  --nodes WHICH     the nodes each AZ lists: all, attention (not HEALTHY, not serving, a
                    reason of its own, a GPU or its heartbeat missing; the rest counted on one
                    line) or auto (default: all when the AZs shown hold up to 40 nodes,
                    attention above)
  --az NAME         only this AZ's nodes (the fleet's lines above them stay)
                    (--nodes and --az shape the text view; --json always has every node)
  --watch           redraw until Ctrl-C; a Redis outage shows a banner and keeps trying
  --interval MS     refresh period with --watch (default 2000, at least 100)
  --help            this text

Exit codes: 0 shown, 1 Redis unreachable, 2 bad flags, 3 no data for the cluster.
Colours only on a terminal, and never with NO_COLOR set. Details: docs/status.md
`;

export class StatusUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StatusUsageError";
  }
}

export interface StatusArgs {
  redisUrl: string;
  cluster: string;
  caFile: string | null;
  events: number;
  json: boolean;
  /** Columns each line fits (Infinity with \`-o wide\`). */
  width: number;
  watch: boolean;
  intervalMs: number;
  /** The nodes each AZ's table lists (`--nodes`). */
  nodes: NodeListing;
  /** Only this AZ's table (`--az`), or every AZ. */
  az: string | null;
}

/** The fleet flags every command reading Redis takes, as `llm-ha agent` names them. */
export const FLEET_FLAGS = ["--redis-url", "--cluster", "--redis-ca-file"] as const;
/** Old spellings that still work, never suggested: `--ca-file` was status's name for `--redis-ca-file`. */
export const FLAG_ALIASES: Readonly<Record<string, string>> = { "--ca-file": "--redis-ca-file" };

/** `argv` with every old flag spelling (`--ca-file`, `--ca-file=X`) replaced by its current one. */
export function renameAliases(argv: readonly string[]): string[] {
  return argv.map((a) => {
    const [name, ...value] = a.split("=");
    const now = FLAG_ALIASES[name];
    return now ? [now, ...value].join("=") : a;
  });
}

/** `--json` or `-o json` (`-o text` is the default); anything else for `-o` is a usage error. */
export function jsonWanted(values: { json?: boolean; output?: string }, usageError: (message: string) => Error): boolean {
  if (values.output !== undefined && values.output !== "json" && values.output !== "text") throw usageError(`-o/--output must be json or text, got ${JSON.stringify(values.output)}`);
  return values.json === true || values.output === "json";
}

/**
 * Flags over the environment; null for `--help`. Throws `StatusUsageError`. `otherFlags`: the
 * calling command's own flags (already taken out of `argv`), offered by "did you mean".
 */
export function parseStatusArgs(argv: string[], env: NodeJS.ProcessEnv, otherFlags: readonly string[] = []): StatusArgs | null {
  const options = {
    "redis-url": { type: "string" },
    cluster: { type: "string" },
    "redis-ca-file": { type: "string" },
    events: { type: "string" },
    json: { type: "boolean" },
    output: { type: "string", short: "o" },
    watch: { type: "boolean" },
    interval: { type: "string" },
    nodes: { type: "string" },
    az: { type: "string" },
    help: { type: "boolean", short: "h" },
  } as const;
  let values;
  try {
    ({ values } = parseArgs({ args: renameAliases(argv), strict: true, allowPositionals: false, options }));
  } catch (err) {
    throw new StatusUsageError(flagErrorMessage(err, [...Object.keys(options), ...otherFlags], FLAG_ALIASES));
  }
  if (values.help) return null;
  const int = (flag: string, v: string, min: number, max: number): number => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new StatusUsageError(`${flag} must be a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  const redisUrl = values["redis-url"] ?? env.LLMHA_REDIS_URL ?? "";
  if (!redisUrl) throw new StatusUsageError("no Redis to read: pass --redis-url or set LLMHA_REDIS_URL");
  if (values.interval !== undefined && !values.watch) throw new StatusUsageError("--interval only applies with --watch");
  let mode;
  try {
    mode = outputMode(values.output, values.json);
  } catch (e) {
    throw e instanceof OutputFlagError ? new StatusUsageError(e.message) : e;
  }
  const nodes = values.nodes ?? "auto";
  if (!(NODE_LISTINGS as readonly string[]).includes(nodes)) throw new StatusUsageError(`--nodes must be ${NODE_LISTINGS.join(", ")}, got ${JSON.stringify(nodes)}`);
  if (values.az !== undefined && values.az.trim() === "") throw new StatusUsageError("--az needs an AZ name");
  const columns = terminalColumns(env);
  return {
    redisUrl,
    cluster: values.cluster ?? (env.LLMHA_CLUSTER || "default"),
    caFile: values["redis-ca-file"] ?? (env.LLMHA_REDIS_CA_FILE || null),
    events: values.events === undefined ? 10 : int("--events", values.events, 0, 1000),
    json: mode === "json",
    width: mode === "wide" ? Infinity : Number.isFinite(columns) ? columns : STATUS_WIDTH,
    watch: values.watch ?? false,
    intervalMs: values.interval === undefined ? 2000 : int("--interval", values.interval, 100, 3_600_000),
    nodes: nodes as NodeListing,
    az: values.az ?? null,
  };
}

/** Resolves once the client is ready, or with the first connection error, or on timeout. */
export function firstContact(client: RedisClient, timeoutMs: number): Promise<string | null> {
  if (client.connected) return Promise.resolve(null);
  return new Promise((resolve) => {
    const done = (err: string | null): void => {
      clearTimeout(t);
      client.redis.off("ready", onReady);
      client.redis.off("error", onError);
      resolve(err);
    };
    const onReady = (): void => done(null);
    const onError = (e: Error): void => done(describeRedisError(e.message || e.name));
    const t = setTimeout(() => done(`no answer within ${timeoutMs} ms`), timeoutMs);
    client.redis.on("ready", onReady);
    client.redis.on("error", onError);
  });
}

/** A failed first contact, explained: a port that answers in another protocol is named as such. */
export async function explainContact(url: string, contact: string): Promise<string> {
  if (contact.includes("does not speak the Redis protocol")) return contact;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return contact;
  }
  if (u.protocol !== "redis:") return contact; // TLS: the handshake error already says enough
  const probe = await speaksResp(u.hostname, Number(u.port || 6379));
  if (probe && !probe.resp) return `the server does not speak the Redis protocol (wrong host or port?): it answered ${JSON.stringify(probe.firstBytes)} (${contact})`;
  return contact;
}

function emptyMessage(cluster: string, others: string[]): string {
  const rest = others.filter((c) => c !== cluster);
  return `no llm-ha data for cluster ${cluster} in Redis` + (rest.length ? ` (clusters found: ${rest.join(", ")}; pick one with --cluster)` : "");
}

export const CONNECT_TIMEOUT_MS = 2000;

/**
 * The flags of a command reading the fleet's Redis (status, practice, canary…), checked, and a
 * client on it; an exit code when they are bad. `command` names the command in `--help` hints
 * and `usage` is what its `--help` prints.
 */
export function openFleetRedis(
  argv: string[],
  name: string,
  err: (line: string) => void,
  command: { name: string; usage: string; flags?: readonly string[] } = { name: "status", usage: STATUS_USAGE },
): { args: StatusArgs; keys: RedisKeys; client: RedisClient } | number {
  let args: StatusArgs | null;
  let keys: RedisKeys;
  let tls: ConnectionOptions | undefined;
  try {
    args = parseStatusArgs(argv, process.env, command.flags);
    if (!args) {
      process.stdout.write(command.usage);
      return 0;
    }
    try {
      keys = new RedisKeys(args.cluster);
    } catch (e) {
      throw new StatusUsageError(`--cluster: ${(e as Error).message}`);
    }
    if (args.caFile) {
      try {
        tls = { ca: readFileSync(args.caFile) };
      } catch (e) {
        throw new StatusUsageError(`--redis-ca-file cannot be read: ${(e as Error).message}`);
      }
    }
  } catch (e) {
    if (e instanceof StatusUsageError) {
      err(`${e.message} (see llm-ha ${command.name} --help)`);
      return 2;
    }
    throw e;
  }
  try {
    const client = createRedisClient(args.redisUrl, {
      name,
      log: createLogger({ level: "silent" }),
      tls,
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      commandTimeoutMs: 2000,
      minBackoffMs: 250,
      maxBackoffMs: Math.min(2000, args.intervalMs),
    });
    return { args, keys, client };
  } catch (e) {
    if (e instanceof RedisUrlError) {
      err(`--redis-url: ${e.message.replace(/^LLMHA_REDIS_URL /, "")}`);
      return 2;
    }
    throw e;
  }
}

export async function statusCommand(argv: string[]): Promise<number> {
  const err = (line: string): void => {
    process.stderr.write(`llm-ha status: ${line}\n`);
  };
  const opened = openFleetRedis(argv, "llmha-status", err);
  if (typeof opened === "number") return opened;
  const { args, keys, client } = opened;
  const shown = safeUrl(args.redisUrl);
  if (!args.watch) {
    try {
      return await once(client, keys, args, shown, err);
    } finally {
      await client.close();
    }
  }
  const code = await watch(client, keys, args, shown);
  await client.close();
  // Ctrl-C must not hang: ioredis 6 keeps a 2 s timer for a socket that had already
  // closed when a reconnecting client is closed. Exit once stdout has drained (as the agent does on SIGTERM).
  return new Promise<number>(() => process.stdout.write("", () => process.exit(code)));
}

/** The `--json` document when there is no fleet view to show: the schema version, what was asked, the error. */
function errorDocument(a: StatusArgs, shown: string, error: string): { version: number; cluster: string; redis: string; now: number; error: string } {
  return { version: STATUS_JSON_VERSION, cluster: a.cluster, redis: shown, now: Date.now(), error };
}

/** How the text view is drawn for these flags. */
function textOptions(a: StatusArgs, color: boolean): FleetRenderOptions {
  return { color, width: a.width, nodes: a.nodes, az: a.az };
}

async function once(client: RedisClient, keys: RedisKeys, a: StatusArgs, shown: string, err: (l: string) => void): Promise<number> {
  // With --json a pipe into jq always gets a document: the error rides in it, the message on stderr.
  const fail = (message: string, code: number): number => {
    if (a.json) process.stdout.write(JSON.stringify(errorDocument(a, shown, message), null, 2) + "\n");
    err(message);
    return code;
  };
  const contact = await firstContact(client, CONNECT_TIMEOUT_MS + 1000);
  if (contact !== null) return fail(`cannot reach Redis at ${shown}: ${await explainContact(a.redisUrl, contact)}`, 1);
  let view: FleetView;
  try {
    view = await readFleetView(client.redis, keys, { events: a.events, url: shown });
    if (view.empty) {
      const message = emptyMessage(a.cluster, await findClusters(client.redis));
      if (a.json) process.stdout.write(JSON.stringify(view, null, 2) + "\n");
      err(message);
      return 3;
    }
  } catch (e) {
    return fail(`Redis at ${shown} failed the read: ${(e as Error).message}`, 1);
  }
  const missing = a.json ? null : missingAz(view, a.az);
  if (missing) {
    err(`--az: ${missing}`);
    return 2;
  }
  const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
  process.stdout.write(a.json ? JSON.stringify(view, null, 2) + "\n" : renderFleetView(view, textOptions(a, color)).join("\n") + "\n");
  return 0;
}

/** Redraws every `intervalMs` until SIGINT/SIGTERM; resolves 0. */
function watch(client: RedisClient, keys: RedisKeys, a: StatusArgs, shown: string): Promise<number> {
  const tty = Boolean(process.stdout.isTTY);
  const color = tty && !process.env.NO_COLOR;
  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let lastGood: FleetView | null = null;
  let lastGoodAt = 0;
  let lastError = "connecting";
  let first = true;
  client.redis.on("error", (e: Error) => {
    lastError = describeRedisError(e.message || e.name);
  });
  process.stdout.on("error", () => stop()); // a closed pipe (`| head`) ends the watch
  const write = (lines: string[]): void => {
    if (closed) return;
    if (a.json || !tty) {
      process.stdout.write(lines.join("\n") + "\n");
      return;
    }
    // Redraw in place: home, each line cleared to its end, then clear whatever is below.
    process.stdout.write((first ? "\x1b[2J" : "") + "\x1b[H" + lines.map((l) => l + "\x1b[K").join("\n") + "\n\x1b[J");
    first = false;
  };
  const frame = async (): Promise<void> => {
    try {
      if (!client.connected) throw new StatusReadError(lastError);
      const view = await readFleetView(client.redis, keys, { events: a.events, url: shown });
      lastGood = view;
      lastGoodAt = Date.now();
      if (a.json) return write([JSON.stringify(view)]);
      const lines = renderFleetView(view, textOptions(a, color));
      if (view.empty) lines.unshift(renderBanner(`${emptyMessage(a.cluster, await findClusters(client.redis))}; waiting for it`, { color }));
      write(lines);
    } catch (e) {
      const msg = (e as Error).message;
      if (a.json) {
        write([JSON.stringify(errorDocument(a, shown, `redis unreachable: ${msg}`))]);
        return;
      }
      const since = lastGood ? `; below: the last good read, from ${formatAge(Date.now() - lastGoodAt)}` : "";
      write([
        renderBanner(`Redis unreachable at ${shown}: ${msg}`, { color }),
        renderBanner(`retrying every ${a.intervalMs} ms${since}`, { color }),
        ...(lastGood ? renderFleetView(lastGood, textOptions(a, color)) : []),
      ]);
    }
  };
  let resolveDone: (code: number) => void = () => undefined;
  const done = new Promise<number>((r) => (resolveDone = r));
  function stop(): void {
    if (closed) return;
    closed = true;
    if (timer) clearTimeout(timer);
    if (tty && !a.json) process.stdout.write("\x1b[?25h");
    resolveDone(0);
  }
  const loop = (): void => {
    if (closed) return;
    const started = Date.now();
    void frame().finally(() => {
      if (!closed) timer = setTimeout(loop, Math.max(0, a.intervalMs - (Date.now() - started)));
    });
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  if (tty && !a.json) process.stdout.write("\x1b[?25l");
  // The first frame waits for the connection (or its first error) so it is not a false banner.
  void firstContact(client, CONNECT_TIMEOUT_MS + 1000).then(loop);
  return done;
}
