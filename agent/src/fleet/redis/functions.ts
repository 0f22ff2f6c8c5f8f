/**
 * llm-ha's Lua runs as Redis Functions (Redis 7 `FUNCTION LOAD`, `FCALL`, `FCALL_RO`), never as
 * `EVAL`: a role that may `EVAL` runs any Lua it likes, and one `EVAL "while true do end" 0`
 * answers BUSY to every client until someone kills it (the lease cannot renew, `/az/health`
 * fails open). With functions, a role holds `FCALL` only: it can run the code that was loaded,
 * with the keys its ACL user may touch, and nothing else.
 *
 * A library is generated from scripts (their text and key count): each becomes a function
 * named `<library>_<name>`, read-only ones flagged `no-writes` so `FCALL_RO` (and the
 * read-only reader role) can run them. Every function first checks its arguments: the number of
 * keys it takes, how many arguments, and a bound on each argument's size, refused with an error
 * that names the argument — one node cannot fill Redis through a heartbeat.
 *
 * The library's name carries its version (a hash of its code): `llmha_fleet_<version>`. A
 * newer agent calls functions of its own version; while only an older library is loaded, its
 * calls answer "Function not found" and it waits for the controller to load its version.
 * Old and new libraries live side by side during a rolling deploy.
 *
 * Loading a library is as powerful as EVAL, so only a trusted identity loads: the controller
 * (a client made with `load: true`) at every connection and again whenever a call answers that
 * the function does not exist (a Redis restarted without persistence, a `FUNCTION FLUSH`); the
 * lab's admin when it starts redis-server; an operator with the break-glass user
 * (`llm-ha redis-functions load`). Every other client retries a few times, logs, and fails the
 * call (its caller's loop tries again on its next round).
 */
import { createHash } from "node:crypto";
import type { ChainableCommander, Redis } from "ioredis";
import type { Logger } from "../../util/log";

export interface FunctionSpec {
  /** Function name inside the library (`heartbeat`). */
  readonly name: string;
  /** How many keys it takes (`FCALL name <keys> …`). */
  readonly keys: number;
  /** The Lua: a script body that reads `KEYS` and `ARGV` and returns, as for EVAL. */
  readonly lua: string;
  /** Reads only: flagged `no-writes`, called with `FCALL_RO`. */
  readonly readOnly?: boolean;
  /**
   * Runs while Redis is out of memory (`allow-oom`): only for writes that cannot grow it (the
   * lease's renew and release), so that a full Redis (`noeviction`) does not also cost the lease.
   */
  readonly allowOom?: boolean;
  /** Names of arguments for the error that refuses an oversized one (index from 1). */
  readonly argNames?: Readonly<Record<number, string>>;
  /** Bound on each argument's size in bytes. Default 4096. */
  readonly maxArgBytes?: number;
  /** Bound on the number of arguments. Default 64. */
  readonly maxArgs?: number;
}

export interface FunctionLibrary {
  /** `llmha_<family>_<version>`. */
  readonly name: string;
  readonly family: string;
  readonly version: string;
  /** The `FUNCTION LOAD` text (starts with `#!lua name=…`). */
  readonly code: string;
  readonly specs: ReadonlyMap<string, FunctionSpec>;
}

export class FunctionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FunctionsError";
  }
}

/** A call found no function of this build's library, and this client may not load one. */
export class FunctionsMissingError extends FunctionsError {
  constructor(readonly library: string, fn: string) {
    super(`Redis has no function ${fn}: library ${library} is not loaded (the controller loads it when it connects; an operator can run \`llm-ha redis-functions load\`)`);
    this.name = "FunctionsMissingError";
  }
}

export const DEFAULT_MAX_ARG_BYTES = 4096;
export const DEFAULT_MAX_ARGS = 64;
/** A key name is a prefix and an id: nothing llm-ha writes comes near this. */
const MAX_KEY_BYTES = 1024;

/** A Lua string literal of plain text. */
function luaString(s: string): string {
  return `"${s.replace(/[^A-Za-z0-9 _.,:;()/=+<>-]/g, "")}"`;
}

function checkName(kind: string, s: string): void {
  if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(s)) throw new FunctionsError(`${kind} ${JSON.stringify(s)} must be letters, digits and _ (Redis function names)`);
}

/**
 * Generates the library: one helper that checks arguments, then each script wrapped as the
 * callback of a registered function (its `KEYS` and `ARGV` become the callback's parameters,
 * so the script text runs unchanged).
 */
export function buildLibrary(family: string, specs: readonly FunctionSpec[]): FunctionLibrary {
  checkName("library family", family);
  const byName = new Map<string, FunctionSpec>();
  for (const s of specs) {
    checkName("function", s.name);
    if (byName.has(s.name)) throw new FunctionsError(`function ${s.name} is defined twice in ${family}`);
    byName.set(s.name, s);
  }
  const version = createHash("sha256")
    .update(JSON.stringify([...byName.values()].map((s) => [s.name, s.keys, s.lua, !!s.readOnly, !!s.allowOom, s.maxArgBytes ?? null, s.maxArgs ?? null])))
    .digest("hex")
    .slice(0, 12);
  const name = `llmha_${family}_${version}`;
  const parts = [
    `#!lua name=${name}`,
    "",
    "-- Generated by agent/src/fleet/redis/functions.ts: each function checks its arguments, then runs its script.",
    "local function llmha_check(fname, nkeys, keys, args, maxBytes, maxArgs, names)",
    "  if #keys ~= nkeys then",
    `    return redis.error_reply("ERR llm-ha " .. fname .. " takes " .. nkeys .. " keys, got " .. #keys)`,
    "  end",
    "  for i = 1, #keys do",
    `    if #keys[i] > ${MAX_KEY_BYTES} then return redis.error_reply("ERR llm-ha " .. fname .. ": key " .. i .. " is " .. #keys[i] .. " bytes, over the bound of ${MAX_KEY_BYTES}") end`,
    "  end",
    "  if #args > maxArgs then",
    `    return redis.error_reply("ERR llm-ha " .. fname .. " takes at most " .. maxArgs .. " arguments, got " .. #args)`,
    "  end",
    "  for i = 1, #args do",
    "    if #args[i] > maxBytes then",
    "      local n = names[i]",
    `      return redis.error_reply("ERR llm-ha " .. fname .. ": argument ARGV[" .. i .. "]" .. (n and (" (" .. n .. ")") or "") .. " is " .. #args[i] .. " bytes, over the bound of " .. maxBytes)`,
    "    end",
    "  end",
    "  return nil",
    "end",
  ];
  for (const s of byName.values()) {
    const names = Object.entries(s.argNames ?? {})
      .map(([i, n]) => `[${Number(i)}]=${luaString(n)}`)
      .join(", ");
    parts.push(
      "",
      `redis.register_function{function_name="${name}_${s.name}", flags={${[s.readOnly ? '"no-writes"' : "", s.allowOom ? '"allow-oom"' : ""].filter(Boolean).join(", ")}}, callback=function(KEYS, ARGV)`,
      `local llmha_refused = llmha_check("${s.name}", ${s.keys}, KEYS, ARGV, ${s.maxArgBytes ?? DEFAULT_MAX_ARG_BYTES}, ${s.maxArgs ?? DEFAULT_MAX_ARGS}, {${names}})`,
      "if llmha_refused then return llmha_refused end",
      s.lua.trimEnd(),
      "end}",
    );
  }
  return { name, family, version, code: `${parts.join("\n")}\n`, specs: byName };
}

/** The full function name of `fn` in `lib`. */
export function functionName(lib: FunctionLibrary, fn: string): string {
  if (!lib.specs.has(fn)) throw new FunctionsError(`library ${lib.family} has no function ${fn}`);
  return `${lib.name}_${fn}`;
}

// ---- who loads, who waits ------------------------------------------------------------

export interface FunctionsClientOptions {
  /**
   * This client's user may `FUNCTION LOAD` (the controller, the drill's contending agents):
   * it loads these libraries at each connection and reloads one whose function is missing.
   */
  load?: readonly FunctionLibrary[];
  log?: Logger;
  /** Calls made again while the library is missing (not a loader). Default 2. */
  retries?: number;
  /** Wait before each such retry. Default 250 ms. */
  retryMs?: number;
}

const settings = new WeakMap<Redis, FunctionsClientOptions>();
const loading = new WeakMap<Redis, Map<string, Promise<void>>>();
const missingSince = new WeakMap<Redis, number>();

/** How `redis` calls functions (idempotent; the last call wins). A client never set waits like an agent. */
export function useFunctions(redis: Redis, opts: FunctionsClientOptions): void {
  settings.set(redis, opts);
  if (opts.load?.length) {
    const libs = opts.load;
    // At each connection: a restarted Redis (no persistence) or a new primary without them.
    redis.on("ready", () => {
      for (const lib of libs) {
        loadLibrary(redis, lib).catch((err: Error) => opts.log?.error({ err: err.message, library: lib.name }, "could not load the Redis functions library"));
      }
    });
  }
}

/** The settings of `redis` (for a duplicated connection that must do the same). */
export function functionsOptionsOf(redis: Redis): FunctionsClientOptions {
  return settings.get(redis) ?? {};
}

export function isFunctionMissing(err: unknown): boolean {
  return err instanceof Error && /Function not found/i.test(err.message);
}

/** `FUNCTION LOAD` the library unless Redis has it (one load at a time per client and library). */
export function loadLibrary(redis: Redis, lib: FunctionLibrary): Promise<void> {
  let m = loading.get(redis);
  if (!m) loading.set(redis, (m = new Map()));
  const running = m.get(lib.name);
  if (running) return running;
  const p = (async () => {
    try {
      // No REPLACE: the name carries a hash of the code, so a library of that name is this one (nothing to recompile or replicate).
      await redis.call("FUNCTION", "LOAD", lib.code);
    } catch (err) {
      const msg = (err as Error).message;
      if (/already exists/i.test(msg)) return;
      if (/unknown command/i.test(msg)) throw new FunctionsError(`Redis does not know FUNCTION (llm-ha needs Redis 7 or Valkey): ${msg}`);
      throw err;
    } finally {
      m.delete(lib.name);
    }
  })();
  m.set(lib.name, p);
  return p;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * `FCALL` (or `FCALL_RO` for a read-only function) of `fn` in `lib`. A loader reloads a missing
 * library once and calls again; any other client calls again `retries` times, `retryMs` apart,
 * logging once per absence, then throws FunctionsMissingError.
 */
export async function callFunction(redis: Redis, lib: FunctionLibrary, fn: string, keys: readonly (string | number)[], args: readonly (string | number)[]): Promise<unknown> {
  const spec = lib.specs.get(fn);
  if (!spec) throw new FunctionsError(`library ${lib.family} has no function ${fn}`);
  if (keys.length !== spec.keys) throw new FunctionsError(`${fn} takes ${spec.keys} keys, got ${keys.length}`);
  const full = `${lib.name}_${fn}`;
  const o = settings.get(redis) ?? {};
  const loader = o.load?.some((l) => l.name === lib.name) ?? false;
  const retries = loader ? 1 : (o.retries ?? 2);
  for (let attempt = 0; ; attempt++) {
    try {
      const out = await redis.call(spec.readOnly ? "FCALL_RO" : "FCALL", full, spec.keys, ...keys, ...args);
      if (missingSince.has(redis)) {
        o.log?.info({ library: lib.name, waitedMs: Date.now() - (missingSince.get(redis) ?? 0) }, "Redis functions library is loaded again");
        missingSince.delete(redis);
      }
      return out;
    } catch (err) {
      if (!isFunctionMissing(err) || attempt >= retries) {
        if (isFunctionMissing(err)) throw new FunctionsMissingError(lib.name, full);
        throw err;
      }
      if (loader) {
        // What took one library (a restart without persistence, a FUNCTION FLUSH) took them all: the fallback's too.
        o.log?.warn({ library: lib.name }, "Redis has lost the functions libraries (a restart without persistence, a flush): loading them again");
        await Promise.all((o.load ?? [lib]).map((l) => loadLibrary(redis, l)));
        continue;
      }
      if (!missingSince.has(redis)) {
        missingSince.set(redis, Date.now());
        o.log?.warn({ library: lib.name, function: full }, "Redis has no functions library of this version yet: waiting for the controller to load it");
      }
      await sleep(o.retryMs ?? 250);
    }
  }
}

/** Queues an `FCALL` on a pipeline (no retry: the bench's simulated fleet). */
export function callFunctionOnPipeline(p: ChainableCommander, lib: FunctionLibrary, fn: string, keys: readonly (string | number)[], args: readonly (string | number)[]): ChainableCommander {
  const spec = lib.specs.get(fn);
  if (!spec) throw new FunctionsError(`library ${lib.family} has no function ${fn}`);
  return p.call(spec.readOnly ? "FCALL_RO" : "FCALL", `${lib.name}_${fn}`, spec.keys, ...keys, ...args);
}
