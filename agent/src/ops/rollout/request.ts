/**
 * `llm-ha rollout`'s pure parts: its own flags, what the leader would refuse (so the operator
 * hears it now rather than in `status` later), and the request it writes. The command
 * (command.ts) reads the fleet, asks these, and writes or refuses.
 */
import { didYouMean } from "../../../../contracts/did-you-mean";
import { majorityRevision, ROLLOUT_REQUEST_OVERDUE_MS } from "../status/rollout";
import type { FleetView } from "../status/types";
import type { RolloutRequest } from "../../fleet/rollout/types";
import { tierForbidsStart } from "../../fleet/rollout/view";

export const ROLLOUT_OPS = ["start", "status", "pause", "resume", "abort", "promote"] as const;
export type RolloutOp = (typeof ROLLOUT_OPS)[number];

export interface RolloutFlags {
  op: RolloutOp;
  to?: string;
  image?: string;
  bakeMs?: number;
  id?: string;
  wait: boolean;
  timeoutMs: number;
  /** The fleet flags (and --json, -o), for openFleetRedis. */
  rest: string[];
}

/** rollout's own flags, beside the fleet flags (offered by "did you mean"). */
export const OWN_FLAGS = ["to", "image", "bake", "id", "wait", "wait-timeout"];
/** `--wait` follows a rollout for up to 6 h by default: a few AZs, each switched, loaded and baked. */
export const DEFAULT_WAIT_TIMEOUT_S = 21_600;
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** A revision goes into the comma-separated `allow` list agents read: no commas, no blanks. */
const REVISION = /^[^\s,]{1,200}$/;
const IMAGE = /^[^\s,@]+@sha256:[0-9a-f]{64}$/;

/** The subcommand and rollout's own flags taken out of `argv`; a string is a usage error. */
/** A start without `--id` gets `defaultRolloutId` once the fleet (and Redis's clock) is read. */
export function parseRolloutFlags(argv: readonly string[]): RolloutFlags | string | null {
  const [op, ...args] = argv;
  if (op === undefined || op === "--help" || op === "-h" || op === "help") return null;
  if (!(ROLLOUT_OPS as readonly string[]).includes(op)) {
    return op.startsWith("-") ? `the first word is the subcommand (${ROLLOUT_OPS.join(", ")}), got ${JSON.stringify(op)}` : `unknown subcommand ${JSON.stringify(op)}${didYouMean(op, ROLLOUT_OPS)} (one of ${ROLLOUT_OPS.join(", ")})`;
  }
  const own = new Map<string, string>();
  let wait = false;
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--wait") {
      wait = true;
      continue;
    }
    const eq = a.indexOf("=");
    const name = a.startsWith("--") ? (eq > 0 ? a.slice(2, eq) : a.slice(2)) : "";
    if (name && name !== "wait" && OWN_FLAGS.includes(name)) {
      if (eq > 0) own.set(name, a.slice(eq + 1));
      else if (i + 1 >= args.length) return `--${name} needs a value`;
      else own.set(name, args[++i]);
    } else rest.push(a);
  }
  if (rest.includes("--help") || rest.includes("-h")) return null;
  const only = (flag: string, ops: readonly RolloutOp[]): string | null => (own.has(flag) && !ops.includes(op as RolloutOp) ? `--${flag} only applies to ${ops.join(", ")}` : null);
  const misplaced = only("to", ["start"]) ?? only("image", ["start"]) ?? only("bake", ["start"]) ?? only("id", ["start", "pause", "resume", "abort", "promote"]);
  if (misplaced) return misplaced;
  if (wait && op === "pause") return "--wait does not apply to pause: a paused rollout waits for resume or abort";
  if (own.has("wait-timeout") && !wait) return "--wait-timeout only applies with --wait";
  const to = own.get("to");
  if (op === "start" && to === undefined) return "start needs --to REV: the model revision to roll out (what the server reports: vLLM's root, TGI's model_sha)";
  if (to !== undefined && !REVISION.test(to)) return `--to must be a revision of 1 to 200 characters without blanks or commas, got ${JSON.stringify(to)}`;
  const image = own.get("image");
  if (image !== undefined && !IMAGE.test(image)) return `--image must name the image by digest (REPO@sha256:<64 hex>), so a rollback restores exactly what ran; got ${JSON.stringify(image)}`;
  const bake = own.get("bake");
  if (bake !== undefined && (!/^\d+$/.test(bake) || Number(bake) < 1 || Number(bake) > 86_400)) return `--bake must be a whole number of seconds from 1 to 86400, got ${JSON.stringify(bake)}`;
  const id = own.get("id");
  if (id !== undefined && !ID.test(id)) return `--id must be 1 to 64 letters, digits, '.', '_' or '-' (starting with a letter or digit), got ${JSON.stringify(id)}`;
  const timeout = own.get("wait-timeout");
  if (timeout !== undefined && (!/^\d+$/.test(timeout) || Number(timeout) < 1 || Number(timeout) > 604_800)) return `--wait-timeout must be a whole number of seconds from 1 to 604800, got ${JSON.stringify(timeout)}`;
  return {
    op: op as RolloutOp,
    ...(to !== undefined ? { to } : {}),
    ...(image !== undefined ? { image } : {}),
    ...(bake !== undefined ? { bakeMs: Number(bake) * 1000 } : {}),
    ...(id !== undefined ? { id } : {}),
    wait,
    timeoutMs: (timeout === undefined ? DEFAULT_WAIT_TIMEOUT_S : Number(timeout)) * 1000,
    rest,
  };
}

/** `rollout-20261205-183502`: a start's id when `--id` is not given (Redis time, to the second). */
export function defaultRolloutId(at: number): string {
  return `rollout-${new Date(at).toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15)}`;
}

/** The fleet's revision: the last rollout's `current`, else the revision most serving nodes report; null when neither is known. */
export function fleetRevision(view: FleetView): string | null {
  return view.rollout?.current ?? majorityRevision(view.models?.majority);
}

/**
 * Why the leader would not act on this request now, or null when it would. `start`: no leader,
 * a rollout under way or a request not acted on yet, an incident (an AZ degraded or out: the
 * batches could not keep its floor), `--to` what the fleet serves already, an id used before.
 * The others: no rollout under way, `--id` naming another, the phase they do not apply to.
 */
export function rolloutRefusal(view: FleetView, f: RolloutFlags): string | null {
  const r = view.rollout ?? null;
  const last = r?.last ?? null;
  const active = last?.active ? last : null;
  // A request the leader has not taken for a minute was refused (or no leader runs): a new one may replace it.
  const pending = r?.pending && view.now - r.pending.at <= ROLLOUT_REQUEST_OVERDUE_MS ? r.pending : null;
  const pendingText = pending ? `a ${pending.op} request (${pending.id}, ${Math.max(0, Math.round((view.now - pending.at) / 1000))} s ago) is not acted on yet` : "";
  if (f.op === "start") {
    if (!view.leader.holder) return "no leader holds the lease: no one would carry the rollout out (is a controller running?)";
    if (active) return `rollout ${active.id} is under way (${active.phase}, step ${active.step + 1} of ${active.steps.length}): one rollout at a time; follow it with llm-ha rollout status, or end it with llm-ha rollout abort`;
    if (pending) return `${pendingText}: wait for the leader's next period (llm-ha rollout status)`;
    const tier = tierForbidsStart(view.tier ?? undefined);
    if (tier) return tier;
    const current = fleetRevision(view);
    if (current !== null && f.to === current && !f.image) return `the fleet serves ${current} already (${view.rollout?.current ? "the last rollout's revision" : "the revision most serving nodes report"}): nothing to roll out (an engine change alone needs --image)`;
    if (last && last.id === f.id) return `the id ${f.id} was the last rollout's (${last.phase}): the leader acts on each id once; pick another --id or leave it out`;
    return null;
  }
  if (f.op === "status") return null;
  if (!active) return last ? `no rollout is under way: the last one, ${last.id}, ended ${last.phase}` : "no rollout is under way (none has run in this cluster)";
  if (f.id !== undefined && f.id !== active.id) return `--id ${f.id} is not the rollout under way (${active.id})`;
  if (pending && f.op !== "abort") return `${pendingText}: wait for the leader's next period, or abort`;
  switch (f.op) {
    case "pause":
      if (active.phase === "paused") return `rollout ${active.id} is paused already (since ${new Date(active.since).toISOString()}); resume or abort it`;
      if (active.phase === "rolling-back") return `rollout ${active.id} is rolling back (${active.reason || "no reason given"}): a rollback is not paused, it restores the old revision`;
      return null;
    case "resume":
      return active.phase === "paused" ? null : `rollout ${active.id} is not paused (it is ${active.phase})`;
    case "abort":
      return active.phase === "rolling-back" ? `rollout ${active.id} is rolling back already (${active.reason || "no reason given"})` : null;
    case "promote": {
      if (active.phase !== "baking") return `rollout ${active.id} is ${active.phase}${active.phase === "paused" ? " (resume it first)" : ""}: promote ends a step's bake, so the step must be baking`;
      const failed = active.gates.filter((g) => g.verdict === "fail");
      return failed.length ? `gate ${failed.map((g) => `${g.gate} fails (${g.detail})`).join(", ")}: the leader rolls back rather than promote` : null;
    }
  }
  return null;
}

/** The request `llm-ha rollout` writes (`rollout:request`), at Redis time `at`; a start's from the flags, the others name the rollout under way. */
export function buildRequest(view: FleetView, f: RolloutFlags, at: number): RolloutRequest {
  if (f.op === "start") return { op: "start", id: f.id!, at, to: { revision: f.to!, ...(f.image ? { image: f.image } : {}) }, ...(f.bakeMs !== undefined ? { bakeMs: f.bakeMs } : {}), by: "operator" };
  return { op: f.op as RolloutRequest["op"], id: view.rollout!.last!.id, at, by: "operator" };
}
