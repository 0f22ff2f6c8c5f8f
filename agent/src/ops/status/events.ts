/** The `events` stream's entries as lines a person reads: a summary and a tone per type. */
import { parsePlanEntry } from "../../fleet/repair/plan";
import { parseRolloutState } from "./rollout";
import type { RedisKeys } from "../../fleet/redis/keys";
import type { EventRow, EventTone } from "./types";

/** A number from a Redis field; null when missing or not a number. */
export function num(v: string | null | undefined): number | null {
  if (v === null || v === undefined || v === "") return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

const BAD = new Set(["UNHEALTHY", "UNREACHABLE", "EXPIRED", "DOWN", "L3", "L4", "failed", "refused-stale"]);
const WARN = new Set(["DEGRADED", "UNKNOWN", "L1", "L2"]);
const GOOD = new Set(["HEALTHY", "OK", "L0"]);

function toneOf(word: string): EventTone {
  if (BAD.has(word)) return "bad";
  if (WARN.has(word)) return "warn";
  if (GOOD.has(word)) return "ok";
  return "info";
}

function arrow(from: string | undefined, to: string): string {
  return from ? `${from} → ${to}` : to;
}

/** The AZ named by a leader event's key (`llmha:<cluster>:az:<az>:state`). */
function azOfKey(key: string | undefined, keys: RedisKeys): string {
  const m = /^az:(.*):state$/.exec((key ?? "").slice(keys.prefix.length));
  return m ? m[1] : (key ?? "?");
}

/** One stream entry as a line a person reads, by type. */
export function eventRow(id: string, flat: string[], now: number, keys: RedisKeys): EventRow {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]] = flat[i + 1];
  const at = Number(id.split("-")[0]);
  const codes = (label: string, s: string | undefined): string => (s ? ` ${label} ${s.split(/[,;]/).filter(Boolean).join(",")}` : "");
  let summary: string;
  let tone: EventTone;
  switch (f.type) {
    case "node": {
      const where = f.az ? ` (${f.az})` : "";
      if (f.status === "EXPIRED") summary = `node ${f.node}${where} expired: no heartbeat`;
      else if (f.status === "FORGOTTEN") summary = `node ${f.node}${where} forgotten: capacity no longer counted`;
      else if (f.status === "REMOVED") summary = `node ${f.node}${where} left (graceful shutdown)`;
      else summary = `node ${f.node}${where} ${arrow(f.from, f.status)}${codes("hard", f.hard)}${codes("soft", f.soft)}`;
      tone = f.status === "REMOVED" || f.status === "FORGOTTEN" ? "info" : toneOf(f.status);
      break;
    }
    case "az": {
      const cap = f.totalCapacity ? ` (${f.healthyCapacity}/${f.totalCapacity} GPUs)` : "";
      summary = `AZ ${azOfKey(f.key, keys)} ${arrow(f.from, f.state)}${cap}`;
      tone = toneOf(f.state);
      break;
    }
    case "tier":
      summary = `tier ${arrow(f.from, f.level)}: ${f.reason ?? ""}`;
      tone = toneOf(f.level);
      break;
    case "standby":
      summary = `standby ${f.az} ${f.wake === "1" ? "wake" : f.from === "1" ? "back to schedule" : "asleep"}: ${f.reason ?? ""}`;
      tone = f.wake === "1" ? "warn" : f.from === "1" ? "ok" : "info";
      break;
    case "suspect":
      summary = f.codes ? `suspect checks: ${f.codes} (nodes failing only these kept in)` : f.from ? `suspect checks cleared (were ${f.from})` : "suspect checks: none";
      tone = f.codes ? "warn" : f.from ? "ok" : "info";
      break;
    case "shift":
      summary = f.shiftAz ? `zonal shift away from ${f.shiftAz}: ${f.shiftReason ?? ""}` : `zonal shift away from ${f.from || "?"} ended: ${f.shiftReason ?? ""}`;
      tone = f.shiftAz ? "bad" : "ok";
      break;
    case "action":
      summary = `action ${f.action} ${f.az} ${f.outcome} (${f.actuator})${f.detail ? `: ${f.detail}` : ""}`;
      tone = f.outcome === "failed" || f.outcome === "refused-stale" ? "bad" : "info";
      break;
    case "foreign-action":
      // A cloud change the controller did not make (actuators/foreign.ts).
      summary = `not made by llm-ha: ${f.kind} change${f.az ? ` in ${f.az}` : ""}: ${f.detail ?? f.id ?? ""}`;
      tone = "bad";
      break;
    case "model": {
      // The leader's `models` hash: written when the odd nodes change.
      const n = Number(f.outlierCount ?? (f.outliers ? f.outliers.split(",").length : 0));
      const azs = f.outlierAzs ? `; AZ ${f.outlierAzs} serves none of it` : "";
      summary = f.outliers
        ? `model: ${n} node${n === 1 ? "" : "s"} serve another model than ${f.majority || "?"}: ${f.outliers.split(",").join(", ")}${azs}`
        : f.from
          ? `model: every serving node serves ${f.majority || "?"} again`
          : `model: every serving node serves ${f.majority || "nothing yet"}`;
      tone = f.outliers ? (f.outlierAzs ? "bad" : "warn") : f.from ? "ok" : "info";
      break;
    }
    case "repair.advised": {
      // The leader's repair plan (advise mode): one event per node whose decision changed; the field is the node id.
      const id = Object.keys(f).find((k) => !["type", "key", "from", "token", "leader"].includes(k)) ?? "?";
      const e = parsePlanEntry(f[id]);
      const what = !e ? "?" : e.action === "held" ? `held, needs ${e.wanted ?? "?"}` : e.action === "none" ? "no repair needed" : e.action;
      summary = `repair advised for ${id}${e?.az ? ` (${e.az})` : ""}: ${what}${e && e.action !== "none" ? `: ${e.reason}` : ""}`;
      tone = !e || e.action === "none" ? "ok" : e.action === "held" && e.wanted !== "drain" ? "bad" : "warn";
      break;
    }
    case "repair.started":
    case "repair.done":
    case "repair.failed": {
      // The leader acting on a repair (act mode): the field is the node id, its value the active entry (step, action, detail).
      const id = Object.keys(f).find((k) => !["type", "key", "from", "token", "leader"].includes(k)) ?? "?";
      let e: { action?: string; step?: string; failedStep?: string; detail?: string } = {};
      try {
        e = (JSON.parse(f[id] ?? "{}") as typeof e) ?? {};
      } catch {
        e = {};
      }
      const what = f.type === "repair.done" ? "done, the node is back" : f.type === "repair.failed" ? `failed at ${e.failedStep ?? "?"}, the node stays cordoned` : `step ${e.step ?? "?"}`;
      summary = `repair ${e.action ?? "?"} of ${id}: ${what}${e.detail ? `: ${String(e.detail).slice(0, 200)}` : ""}`;
      tone = f.type === "repair.done" ? "ok" : f.type === "repair.failed" ? "bad" : "warn";
      break;
    }
    case "rollout": {
      // The leader's rollout (one event per phase or step change): the fields of the `rollout` hash as written.
      const r = rolloutEvent(f);
      summary = r.summary;
      tone = r.tone;
      break;
    }
    default:
      summary = Object.entries(f).map(([k, v]) => `${k}=${v}`).join(" ");
      tone = "info";
  }
  return { id, at, ageMs: Math.max(0, now - at), type: f.type ?? "?", summary, tone, token: num(f.token), fields: f };
}

const ROLLOUT_TONE: Record<string, EventTone> = { promoted: "ok", "rolled-back": "bad", "rolling-back": "bad", aborted: "warn", paused: "warn" };

/** A `rollout` event: what the step or phase became, with the reason where it ended or turned back. */
function rolloutEvent(f: Record<string, string>): { summary: string; tone: EventTone } {
  const s = f.state ? parseRolloutState(f.state) : null;
  if (!s || typeof s === "string") {
    const step = num(f.step);
    return { summary: `rollout ${f.id ?? "?"} ${f.phase ?? "?"}${step !== null && step >= 0 ? ` at step ${step + 1}` : ""}`, tone: ROLLOUT_TONE[f.phase ?? ""] ?? "info" };
  }
  const step = s.steps[s.step];
  const where = step ? `step ${s.step + 1}/${s.steps.length} ${step.az}` : "";
  let summary: string;
  switch (s.phase) {
    case "promoted":
      summary = `rollout ${s.id} promoted: every step baked, the fleet serves ${s.to.revision}`;
      break;
    case "rolled-back":
    case "aborted":
      summary = `rollout ${s.id} ${s.phase === "aborted" ? "aborted" : "rolled back"}: ${s.from.revision} restored${s.reason ? `: ${s.reason}` : ""}`;
      break;
    case "rolling-back":
      summary = `rollout ${s.id} rolling back from ${where} to ${s.from.revision}${s.reason ? `: ${s.reason}` : ""}`;
      break;
    case "paused":
      summary = `rollout ${s.id} paused at ${where}${s.reason ? `: ${s.reason}` : ""}`;
      break;
    default:
      summary = `rollout ${s.id} ${where} ${s.phase} (${s.from.revision} → ${s.to.revision})${step ? `: ${step.nodes.length} node${step.nodes.length === 1 ? "" : "s"}` : ""}`;
  }
  return { summary, tone: ROLLOUT_TONE[s.phase] ?? "info" };
}
