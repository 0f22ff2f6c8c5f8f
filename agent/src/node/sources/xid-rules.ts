import type { XidEvent } from "./signals";

/**
 * What an XID means for the node, as a table the operator can override (`LLMHA_XID_RULES`):
 * - `fatal`: the GPU needs a reset or a reboot; the node leaves at once and stays out until the
 *   agent restarts (a reboot, or a GPU reset that restarts the pod).
 * - `{count, windowMs}`: a fault only when seen `count` times within `windowMs` (per GPU); it
 *   clears once fewer than `count` remain in the window.
 * - `app`: caused by an application (a bad kernel, an out-of-bounds access). With a process
 *   context in the line (`pid=`) it never takes a node out; without one it counts under
 *   `APP_WITHOUT_PROCESS`.
 * - `ignore`: logged and counted, never acted on.
 * XIDs not in the table count under `UNLISTED`.
 */
export type XidAction = "fatal" | "app" | "ignore" | { count: number; windowMs: number };

/** Sources: NVIDIA's XID catalogue (r555+ "Xid Errors" table, resolution column) and field reports. */
export const DEFAULT_XID_RULES: ReadonlyMap<number, XidAction> = new Map<number, XidAction>([
  // Reset / reboot needed: double-bit ECC, fallen off the bus, NVLink, row-remap failure,
  // uncontained ECC, GSP timeouts and errors, and their kin.
  ...[48, 56, 57, 58, 62, 64, 65, 68, 69, 73, 74, 79, 80, 81, 95, 109, 110, 119, 120, 121, 140].map((c): [number, XidAction] => [c, "fatal"]),
  // Application-caused: graphics engine exception, MMU fault, channel stopped, preemptive cleanup.
  ...[13, 31, 43, 45].map((c): [number, XidAction] => [c, "app"]),
  // Contained ECC (the application was killed, the GPU is fine), row-remap event, high single-bit
  // ECC rate: one is news, a run of them is a failing GPU.
  [94, { count: 3, windowMs: 3_600_000 }],
  [63, { count: 3, windowMs: 3_600_000 }],
  [92, { count: 3, windowMs: 3_600_000 }],
  // Internal micro-controller warnings, page-fault storms.
  [154, { count: 1, windowMs: 600_000 }],
]);

/** How an application XID without a process context, and an unlisted XID, count. */
export const APP_WITHOUT_PROCESS: XidAction = { count: 5, windowMs: 600_000 };
export const UNLISTED: XidAction = { count: 3, windowMs: 600_000 };

export class XidRulesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "XidRulesError";
  }
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `"94=3/10m,13=fatal,31=ignore"` → the default table with these entries replaced. */
export function parseXidRules(text: string | null): Map<number, XidAction> {
  const rules = new Map(DEFAULT_XID_RULES);
  if (text === null) return rules;
  for (const raw of text.split(",")) {
    const item = raw.trim();
    if (item === "") continue;
    const m = /^(\d{1,4})=(.+)$/.exec(item);
    if (!m) throw new XidRulesError(`${JSON.stringify(item)} is not CODE=ACTION (e.g. 94=3/10m, 79=fatal, 13=app, 31=ignore)`);
    const code = Number(m[1]);
    const action = m[2].trim();
    if (action === "fatal" || action === "app" || action === "ignore") {
      rules.set(code, action);
      continue;
    }
    const w = /^(\d+)\/(\d+)(ms|s|m|h)$/.exec(action);
    if (!w) throw new XidRulesError(`XID ${code}: action ${JSON.stringify(action)} must be fatal, app, ignore or K/WINDOW such as 3/10m`);
    const count = Number(w[1]);
    const windowMs = Number(w[2]) * UNIT_MS[w[3]];
    if (count < 1 || count > 1000) throw new XidRulesError(`XID ${code}: count must be 1-1000, got ${count}`);
    if (windowMs < 1000 || windowMs > 7 * 86_400_000) throw new XidRulesError(`XID ${code}: window must be 1s-7d, got ${w[2]}${w[3]}`);
    rules.set(code, { count, windowMs });
  }
  return rules;
}

/** The XID's process context, when the line names one (`pid=1234`; `pid='<unknown>'` is none). */
export function hasProcessContext(line: string): boolean {
  return /\bpid=\d+/.test(line);
}

/** An XID the rules act on: fatal at once, or repeated past its window's count. */
export interface XidVerdict {
  fatal: XidEvent[];
  /** Windowed rules over their count now: `code@bus xN/window`. */
  repeated: { code: number; busId: string; count: number; windowMs: number }[];
}

interface Seen {
  code: number;
  busId: string;
  at: number;
  action: XidAction;
}

/**
 * Applies the rules to XIDs as they arrive. Fatal ones stick (a fatal XID needs a reset, which
 * restarts the agent); windowed ones are kept for their window and judged against the clock.
 */
export class XidJudge {
  private readonly fatal: XidEvent[] = [];
  private seen: Seen[] = [];

  constructor(private readonly rules: ReadonlyMap<number, XidAction>) {}

  /** The action for one event: the table's, `app` without a process counting as a windowed rule. */
  actionOf(x: XidEvent): XidAction {
    const a = this.rules.get(x.code) ?? UNLISTED;
    if (a === "app" && !hasProcessContext(x.line)) return APP_WITHOUT_PROCESS;
    return a;
  }

  add(x: XidEvent, at: number): XidAction {
    const a = this.actionOf(x);
    if (a === "fatal") this.fatal.push(x);
    else if (typeof a === "object") this.seen.push({ code: x.code, busId: x.busId, at, action: a });
    return a;
  }

  verdict(now: number): XidVerdict {
    this.seen = this.seen.filter((s) => typeof s.action === "object" && now - s.at < s.action.windowMs);
    const groups = new Map<string, Seen[]>();
    for (const s of this.seen) {
      const k = `${s.code}@${s.busId}`;
      groups.set(k, [...(groups.get(k) ?? []), s]);
    }
    const repeated: XidVerdict["repeated"] = [];
    for (const list of groups.values()) {
      const a = list[0].action;
      if (typeof a === "object" && list.length >= a.count) repeated.push({ code: list[0].code, busId: list[0].busId, count: list.length, windowMs: a.windowMs });
    }
    return { fatal: [...this.fatal], repeated };
  }
}
