/**
 * The Lua scripts next to this file (`<name>-<numberOfKeys>.lua`, as bullmq names them) are
 * the source of the fleet's Redis Functions library (functions.ts): each script becomes one
 * function, called with `FCALL` (`FCALL_RO` for the read-only registry page), never `EVAL`.
 * A line `--- @include "x"` is replaced by `x.inc.lua` from the same folder (bullmq's
 * includes), so logic two scripts need — the fencing check — is written once. Each script
 * keeps its typed wrapper below; the argument names in a script's header comment
 * (`ARGV[2] az`) name an argument its function refuses as oversized.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { ChainableCommander, Redis } from "ioredis";
import { buildLibrary, callFunction, callFunctionOnPipeline, useFunctions, type FunctionLibrary, type FunctionSpec } from "./functions";

export const SCRIPT_NAMES = ["acquire", "renew", "release", "fencedHset", "heartbeat", "remove", "sweep", "readNodes"] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

/** Scripts that only read: flagged `no-writes`, called with `FCALL_RO` (the read-only reader role runs them). */
const READ_ONLY: ReadonlySet<string> = new Set<ScriptName>(["readNodes"]);

/** Writes that cannot grow Redis: they run while it is full (`noeviction`), so a full Redis does not also cost the lease. */
const ALLOW_OOM: ReadonlySet<string> = new Set<ScriptName>(["renew", "release"]);

/** The most GPU nodes one leader's fenced writes admit (its `inventory` hash, one field each). */
export const MAX_FLEET_NODES = 25_000;

/**
 * Bounds above the default 4 KiB per argument: a fenced write carries the leader's field
 * values (a model list, a practice record), and only the leader's keys admit it.
 */
const BOUNDS: Readonly<Partial<Record<ScriptName, { maxArgBytes?: number; maxArgs?: number }>>> = {
  // The leader's `inventory` hash has a field per GPU node, and is written whole when a node
  // leaves the list: 6 arguments plus a pair per node, for fleets up to MAX_FLEET_NODES.
  fencedHset: { maxArgBytes: 64 * 1024, maxArgs: 6 + 2 * MAX_FLEET_NODES },
};

export class ScriptLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ScriptLoadError";
  }
}

type Arg = string | number;

/** `fenced-hset-3.lua` → `fencedHset`. */
function commandName(base: string): string {
  return base.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

function scriptDir(): string {
  // Under tsx the .lua files sit next to this module; after `tsc` they stay in the source tree.
  const candidates = [__dirname, join(__dirname, "..", "..", "..", "..", "..", "agent", "src", "fleet", "redis")];
  const found = candidates.find((d) => existsSync(join(d, "acquire-3.lua")));
  if (!found) throw new ScriptLoadError(`Lua scripts not found in ${candidates.join(" or ")}`);
  return found;
}

const INCLUDE = /^--- @include "([a-z-]+)"$/gm;

/** The script's text with each `--- @include "x"` line replaced by `x.inc.lua` (one level: includes include nothing). */
function withIncludes(dir: string, file: string): string {
  return readFileSync(join(dir, file), "utf8").replace(INCLUDE, (_line, name: string) => {
    const inc = join(dir, `${name}.inc.lua`);
    if (!existsSync(inc)) throw new ScriptLoadError(`${file} includes "${name}", but ${inc} is missing`);
    return readFileSync(inc, "utf8").trimEnd();
  });
}

/**
 * Argument names from a script's header comment: `ARGV[2]  az` (several on a line, two
 * spaces apart) → {2: "az"}; the name stops at a parenthesis, a colon or two spaces.
 */
export function headerArgNames(lua: string): Record<number, string> {
  const header = /^--\[\[([\s\S]*?)\]\]/.exec(lua)?.[1] ?? "";
  const out: Record<number, string> = {};
  for (const m of header.matchAll(/ARGV\[(\d+)\] +(.+?)(?= {2,}ARGV\[|\n|$)/g)) {
    const name = m[2].split(/ {2,}|\(|:/)[0].trim().slice(0, 40);
    if (name) out[Number(m[1])] = name;
  }
  return out;
}

let cache: FunctionLibrary | null = null;

/** The fleet's library (`llmha_fleet_<version>`), built once from the .lua files. */
export function fleetLibrary(): FunctionLibrary {
  if (cache) return cache;
  const dir = scriptDir();
  const specs: FunctionSpec[] = [];
  for (const file of readdirSync(dir).sort()) {
    const m = /^([a-z-]+)-(\d+)\.lua$/.exec(file);
    if (!m) continue;
    const name = commandName(m[1]);
    const lua = withIncludes(dir, file);
    specs.push({ name, keys: Number(m[2]), lua, readOnly: READ_ONLY.has(name), allowOom: ALLOW_OOM.has(name), argNames: headerArgNames(lua), ...BOUNDS[name as ScriptName] });
  }
  for (const name of SCRIPT_NAMES) {
    if (!specs.some((s) => s.name === name)) throw new ScriptLoadError(`Lua script for ${name} is missing in ${dir}`);
  }
  cache = buildLibrary("fleet", specs);
  return cache;
}

/**
 * Kept for callers of the EVAL days: a client needs nothing defined to call functions. It
 * checks that the scripts load (a missing file fails here, at start) and leaves the client
 * waiting for the library like an agent unless `useFunctions` made it a loader.
 */
export function defineScripts(redis: Redis): void {
  fleetLibrary();
  void redis;
}

function fn(redis: Redis, name: ScriptName): (...args: Arg[]) => Promise<unknown> {
  const lib = fleetLibrary();
  const spec = lib.specs.get(name);
  if (!spec) throw new ScriptLoadError(`script ${name} is missing`);
  return (...args: Arg[]) => callFunction(redis, lib, name, args.slice(0, spec.keys), args.slice(spec.keys));
}

function pfn(pipeline: ChainableCommander, name: ScriptName): (...args: Arg[]) => ChainableCommander {
  const lib = fleetLibrary();
  const spec = lib.specs.get(name);
  if (!spec) throw new ScriptLoadError(`script ${name} is missing`);
  return (...args: Arg[]) => callFunctionOnPipeline(pipeline, lib, name, args.slice(0, spec.keys), args.slice(spec.keys));
}

export { useFunctions };

function num(v: unknown): number {
  return typeof v === "number" ? v : Number(v);
}

// ---- lease ----------------------------------------------------------------------------

/** `poisoned`: `<key>=<value>,…` of insane fence values left out (and healed) by this acquisition; "" none. */
export type AcquireResult = { acquired: true; token: number; poisoned: string } | { acquired: false; holder: string };

export async function acquireScript(
  redis: Redis,
  keys: { leader: string; fence: string; fenceLast: string },
  holderId: string,
  ttlMs: number,
  floor: number,
): Promise<AcquireResult> {
  const r = (await fn(redis, "acquire")(keys.leader, keys.fence, keys.fenceLast, holderId, ttlMs, floor)) as [number, unknown, unknown];
  return num(r[0]) === 1 ? { acquired: true, token: num(r[1]), poisoned: String(r[2] ?? "") } : { acquired: false, holder: String(r[1]) };
}

export async function renewScript(redis: Redis, leaderKey: string, value: string, ttlMs: number): Promise<boolean> {
  return num(await fn(redis, "renew")(leaderKey, value, ttlMs)) === 1;
}

export async function releaseScript(redis: Redis, leaderKey: string, value: string): Promise<boolean> {
  return num(await fn(redis, "release")(leaderKey, value)) === 1;
}

// ---- fenced leader writes -------------------------------------------------------------

export interface FencedHsetArgs {
  fenceLast: string;
  target: string;
  events: string;
  token: number;
  holder: string;
  /** A transition of this field writes an event (omit for none). */
  changeField?: string;
  /** Event type; with no `changeField` every accepted write writes one. Omit for none. */
  eventType?: string;
  eventsMaxLen: number;
  /** `replace` deletes the hash before writing the fields. Default `hset`. */
  mode?: "hset" | "replace";
  fields: Record<string, string | number>;
}

export type FencedResult =
  | { accepted: true; previous: string | null; acceptedAtUs: number }
  | { accepted: false; highestToken: number };

export async function fencedHsetScript(redis: Redis, a: FencedHsetArgs): Promise<FencedResult> {
  const argv: Arg[] = [a.token, a.holder, a.changeField ?? "", a.eventType ?? "", a.eventsMaxLen, a.mode ?? "hset"];
  for (const [k, v] of Object.entries(a.fields)) argv.push(k, v);
  const r = (await fn(redis, "fencedHset")(a.fenceLast, a.target, a.events, ...argv)) as [number, unknown, unknown];
  if (num(r[0]) !== 1) return { accepted: false, highestToken: num(r[1]) };
  const prev = String(r[1] ?? "");
  return { accepted: true, previous: prev === "" ? null : prev, acceptedAtUs: num(r[2]) };
}

// ---- registry -------------------------------------------------------------------------

export interface HeartbeatKeys {
  node: string;
  available: string;
  events: string;
  nodes: string;
  members: string;
  azs: string;
  dead: string;
  /** Read by the script from the prefix (not a KEYS entry: the agent role may only read it); kept for callers. */
  suspect?: string;
}

export interface HeartbeatArgs {
  nodeId: string;
  az: string;
  status: string;
  phase: string;
  weight: number;
  loadScore: number;
  gpus: number;
  gpusExpected: number;
  model: string;
  updatedAt: number;
  ttlMs: number;
  takesTraffic: boolean;
  soft: string;
  hard: string;
  eventsMaxLen: number;
  prefix: string;
  /** This agent process's random id ("" = no claim). */
  instance: string;
  /** What the server says beyond the id, for the same-model check: revision, dtype, max context; "" or absent = unknown. */
  modelRevision?: string;
  modelDtype?: string;
  maxContext?: number | "";
  /** GPU fault facts for the leader's repair ladder (node/sources/gpu-fault.ts); "" or absent = none. */
  gpuFault?: string;
}

function heartbeatArgv(k: HeartbeatKeys, a: HeartbeatArgs): Arg[] {
  return [
    k.node, k.available, k.events, k.nodes, k.members, k.azs, k.dead,
    a.nodeId, a.az, a.status, a.phase, a.weight, a.loadScore, a.gpus, a.gpusExpected, a.model,
    a.updatedAt, a.ttlMs, a.takesTraffic ? "1" : "0", a.soft, a.hard, a.eventsMaxLen, a.prefix, a.instance,
    a.modelRevision ?? "", a.modelDtype ?? "", a.maxContext ?? "", a.gpuFault ?? "",
  ];
}

export interface HeartbeatResult {
  /** True when the status changed (or the node came back after expiring): an event was written. */
  changed: boolean;
  /** Soft check codes the leader marked suspect (blast-radius cap). */
  suspect: string[];
  /** Another live agent's instance that holds this node id (nothing was written); null when written. */
  heldBy: string | null;
}

export function parseHeartbeatReply(r: unknown): HeartbeatResult {
  const [changed, suspect, heldBy] = r as [number, unknown, unknown];
  const codes = String(suspect ?? "");
  const holder = String(heldBy ?? "");
  return { changed: num(changed) === 1, suspect: codes === "" ? [] : codes.split(","), heldBy: holder === "" ? null : holder };
}

export async function heartbeatScript(redis: Redis, k: HeartbeatKeys, a: HeartbeatArgs): Promise<HeartbeatResult> {
  return parseHeartbeatReply(await fn(redis, "heartbeat")(...heartbeatArgv(k, a)));
}

/** Queues one heartbeat on a pipeline (the bench's simulated fleet). */
export function heartbeatOnPipeline(p: ChainableCommander, k: HeartbeatKeys, a: HeartbeatArgs): ChainableCommander {
  return pfn(p, "heartbeat")(...heartbeatArgv(k, a));
}

/** `removed`: the node left; `unknown`: nothing to remove; `held`: another live instance holds the id (left alone). */
export type RemoveResult = "removed" | "unknown" | "held";

export async function removeScript(
  redis: Redis,
  k: { node: string; events: string; nodes: string; members: string; dead: string },
  nodeId: string,
  prefix: string,
  eventsMaxLen: number,
  instance = "",
): Promise<RemoveResult> {
  const r = num(await fn(redis, "remove")(k.node, k.events, k.nodes, k.members, k.dead, nodeId, prefix, eventsMaxLen, instance));
  return r === 1 ? "removed" : r === -1 ? "held" : "unknown";
}

/** `more`: the call's limit cut the work short (call again). */
/** `lastScore`: the last live node's score the call looked at (null: none), where the period's next call goes on from. */
export type SweepResult = { accepted: true; expired: number; forgotten: number; more: boolean; lastScore: string | null } | { accepted: false; highestToken: number };

export async function sweepScript(
  redis: Redis,
  k: { nodes: string; members: string; dead: string; events: string; fenceLast: string },
  a: { prefix: string; token: number; holder: string; silentMs: number; forgetAfterMs: number; eventsMaxLen: number; limit: number; from?: string },
): Promise<SweepResult> {
  const r = (await fn(redis, "sweep")(
    k.nodes, k.members, k.dead, k.events, k.fenceLast,
    a.prefix, a.token, a.holder, a.silentMs, a.forgetAfterMs, a.eventsMaxLen, a.limit, a.from ?? "-inf",
  )) as unknown[];
  if (num(r[0]) !== 1) return { accepted: false, highestToken: num(r[1]) };
  const last = r[4] === undefined || r[4] === null || r[4] === "" ? null : String(r[4]);
  return { accepted: true, expired: num(r[1]), forgotten: num(r[2]), more: num(r[3]) === 1, lastScore: last };
}

/** The controller's compact view of a node (field `c` of its hash). */
export interface CompactNode {
  az: string;
  status: string;
  phase: string;
  weight: number;
  gpus: number;
  gpusExpected: number;
  soft: string[];
  hard: string[];
}

function codes(s: string | undefined): string[] {
  return s ? s.split(";").filter(Boolean) : [];
}

export function parseCompactNode(v: unknown): CompactNode | null {
  if (typeof v !== "string" || v === "") return null;
  const p = v.split("|");
  const t = p.length - 7; // az is first: split from the right so the rest always lines up
  if (t < 1) return null;
  return {
    az: p.slice(0, t).join("|"),
    status: p[t],
    phase: p[t + 1],
    weight: Number(p[t + 2]),
    gpus: Number(p[t + 3]),
    gpusExpected: Number(p[t + 4]),
    soft: codes(p[t + 5]),
    hard: codes(p[t + 6]),
  };
}

export interface NodePage {
  cursor: string;
  entries: { id: string; member: string; view: CompactNode | null }[];
}

/** One HSCAN page of members with each node's compact view (`read-nodes-1.lua`). */
export async function readNodesScript(redis: Redis, membersKey: string, prefix: string, cursor: string, count: number): Promise<NodePage> {
  const flat = (await fn(redis, "readNodes")(membersKey, prefix, cursor, count)) as unknown[];
  const entries: NodePage["entries"] = [];
  for (let i = 1; i + 2 < flat.length; i += 3) {
    entries.push({ id: String(flat[i]), member: String(flat[i + 1]), view: parseCompactNode(flat[i + 2]) });
  }
  return { cursor: String(flat[0]), entries };
}
