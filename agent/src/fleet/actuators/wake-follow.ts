/**
 * Following a standby wake (issue 15): after the wake call, whether the groups launched, and
 * what to do when they cannot — provider-neutral and pure, so the AWS actuator (Auto Scaling
 * groups, scaling activities) and the drill's local cloud run the same decision.
 *
 * The wake is a list of steps tried in order: step 0 is the standby AZ's groups, then the
 * fallback order (a second group of another instance type in the standby AZ, then another
 * AZ's spare group). A step has failed when a launch failed after it was woken and none of
 * its instances is pending or in service, or when nothing came into service within the
 * bound. Then the next step is woken; a failed step is kept raised (the provider keeps
 * retrying it, and whichever launches first serves). When the last step has failed, the
 * capacity is unavailable, with the reason.
 *
 * State lives with the provider, not here: which steps were woken and when (the AWS
 * `llm-ha:pre-wake` tag) and the launches' outcomes (scaling activities), so a new leader
 * continues where the last one stopped.
 */
import type { WakeFailure, WakeFailureClass, WakeReport } from "./types";

/**
 * A launch failure's class from the provider's status message. Real Auto Scaling activity
 * messages (`StatusMessage`, the `Status Reason:` of `Description`), for example:
 * - capacity: `We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1c)…`,
 *   `Could not launch On-Demand Instances. InsufficientInstanceCapacity - …`;
 * - quota: `… VcpuLimitExceeded - You have requested more vCPU capacity than your current vCPU limit of 0 allows…`,
 *   `Your quota allows for 0 more running instance(s). You requested at least 1.` (InstanceLimitExceeded);
 * - launch-config: a capacity reservation or block that cannot serve the launch
 *   (`ReservationCapacityExceeded`, `InvalidCapacityReservationId…`), a launch template that
 *   does not exist or does not validate, an unsupported configuration.
 */
export function classifyLaunchFailure(message: string): WakeFailureClass {
  if (/ReservationCapacityExceeded|CapacityReservation|capacity reservation|Capacity Block|requested reservation/i.test(message)) return "launch-config";
  if (/InsufficientInstanceCapacity|InsufficientCapacity|do not have sufficient .*capacity|insufficient capacity/i.test(message)) return "capacity";
  if (/VcpuLimitExceeded|InstanceLimitExceeded|vCPU (capacity|limit)|quota allows for|instance limit|MaxSpotInstanceCountExceeded/i.test(message)) return "quota";
  if (/launch template|LaunchTemplate|InvalidAMIID|InvalidParameter|not supported|Unsupported|InvalidBlockDeviceMapping|InvalidSubnet|InvalidGroup|iamInstanceProfile/i.test(message)) return "launch-config";
  return "unknown";
}

/** One group as the provider shows it now. */
export interface WakeGroupView {
  name: string;
  /** Woken by llm-ha (AWS: carries the `llm-ha:pre-wake` tag), and when (epoch ms, null when not known). */
  woken: boolean;
  wokenAt: number | null;
  inService: number;
  /** Launched, not in service yet (booting): capacity was found. */
  pending: number;
  /** Failed launches since the wake, oldest first (`at` epoch ms, `message` the provider's). */
  failures: { at: number; message: string }[];
}

/** What to do now: wake step `wake` (null: nothing new), and the report. */
export interface WakePlan {
  wake: number | null;
  report: WakeReport;
  /** One line for the action's detail. */
  detail: string;
}

export interface WakeFollowSettings {
  /** A woken step with nothing in service this long after its wake has failed (`timeout`). */
  boundMs: number;
}

export const DEFAULT_WAKE_BOUND_MS = 900_000;

const describeFailure = (f: WakeFailure): string => `${f.class} on ${f.group}: ${f.message}`;

/** The failure of a step, or null while it may still launch. */
function stepFailure(groups: WakeGroupView[], s: WakeFollowSettings, now: number): WakeFailure | null {
  if (groups.some((g) => g.inService > 0 || g.pending > 0)) return null;
  const failed = groups.flatMap((g) => g.failures.map((f) => ({ ...f, group: g.name }))).sort((a, b) => a.at - b.at);
  if (failed.length) {
    // The latest message names the reason now; the first failure's time starts the clock.
    const last = failed[failed.length - 1];
    return { class: classifyLaunchFailure(last.message), group: last.group, message: last.message, at: failed[0].at };
  }
  const wokenAt = Math.min(...groups.map((g) => g.wokenAt ?? now));
  if (now - wokenAt >= s.boundMs) {
    return { class: "timeout", group: groups.map((g) => g.name).join(","), message: `nothing in service ${Math.round((now - wokenAt) / 1000)} s after the wake (bound ${Math.round(s.boundMs / 1000)} s)`, at: wokenAt + s.boundMs };
  }
  return null;
}

/**
 * The decision for one wake call over the steps (each a list of groups), as the provider
 * shows them now. Never wakes more than one new step per call: each step is its own fenced
 * call, recorded on its own.
 */
export function planWake(steps: WakeGroupView[][], s: WakeFollowSettings, now: number): WakePlan {
  const n = steps.length;
  const names = (i: number): string[] => steps[i].map((g) => g.name);
  const servingAt = steps.findIndex((st) => st.some((g) => g.inService > 0));
  let top = -1;
  steps.forEach((st, i) => {
    if (st.some((g) => g.woken)) top = i;
  });
  let first: WakeFailure | undefined;
  for (let i = 0; i <= top; i++) {
    const f = stepFailure(steps[i], s, now);
    if (f && !first) first = f;
  }
  const wokenAt = (i: number): number | undefined => {
    const ts = steps[i].map((g) => g.wokenAt).filter((t): t is number => t !== null);
    return ts.length ? Math.min(...ts) : undefined;
  };
  const base = (phase: WakeReport["phase"], step: number): WakeReport => ({ phase, step, steps: n, groups: names(step), ...(first ? { failure: first } : {}), ...(wokenAt(step) !== undefined ? { stepWokenAt: wokenAt(step) } : {}) });
  if (servingAt >= 0) {
    return { wake: top < 0 ? 0 : null, report: base("serving", servingAt), detail: `serving: ${steps[servingAt].filter((g) => g.inService > 0).map((g) => `${g.name} ${g.inService} in service`).join(", ")}` };
  }
  if (top < 0) return { wake: 0, report: { ...base("waiting", 0), stepWokenAt: now }, detail: `waking ${names(0).join(",")}` };
  const failure = stepFailure(steps[top], s, now);
  if (!failure) {
    const pending = steps[top].reduce((a, g) => a + g.pending, 0);
    return { wake: null, report: base("waiting", top), detail: `step ${top + 1}/${n} ${names(top).join(",")}: ${pending ? `${pending} launching` : "waiting for a launch"}` };
  }
  if (top + 1 < n) {
    return {
      wake: top + 1,
      report: { ...base("fallback", top + 1), stepWokenAt: now },
      detail: `fallback to step ${top + 2}/${n} ${names(top + 1).join(",")} after ${describeFailure(failure)}`,
    };
  }
  return { wake: null, report: { ...base("unavailable", top), failure: first ?? failure }, detail: `capacity unavailable: every step failed; last ${describeFailure(failure)}` };
}

/** The tier's line for an unavailable wake: `capacity unavailable (capacity on g: We currently…)`. */
export function unavailableReason(r: WakeReport): string {
  const f = r.failure;
  return f ? `capacity unavailable after ${r.steps} step${r.steps > 1 ? "s" : ""} (${f.class} on ${f.group}: ${f.message.slice(0, 160)})` : "capacity unavailable";
}
