/**
 * Following a standby wake: after the wake call, whether the groups launched, and
 * what to do when they cannot — provider-neutral and pure, so the AWS actuator (Auto Scaling
 * groups, scaling activities) and the drill's local cloud run the same decision.
 *
 * The wake is a list of steps tried in order: step 0 is the standby AZ's groups, then the
 * fallback order (a second group of another instance type in the standby AZ, then another
 * AZ's spare group). A step has failed when a launch failed after it was woken and none of
 * its instances is pending or in service, or when nothing came into service within the
 * bound. A step whose instances are in service has failed too (`unhealthy`) when the leader
 * saw no healthy standby node `healthyBoundMs` after its wake (its nodes booted onto bad GPUs:
 * they report hard faults and never take traffic); that needs the leader's word (`WakeHealth`).
 * Then the next step is woken; a failed step is kept raised (the provider keeps retrying it,
 * and whichever launches first serves; an unhealthy step's nodes stay for the repair ladder)
 * and is never woken or counted serving again in the incident (`WakeHealth.failed`, kept by
 * the reconciler in Redis). When the last step has failed, the capacity is unavailable, with
 * the reason.
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
  /** A woken step in service with no healthy standby node this long after its wake has failed (`unhealthy`). Default 600000. */
  healthyBoundMs?: number;
}

export const DEFAULT_WAKE_BOUND_MS = 900_000;
export const DEFAULT_HEALTHY_BOUND_MS = 600_000;

/**
 * The leader's word on the wake, passed with each wake call (the provider cannot tell a
 * healthy node from an instance in service).
 */
export interface WakeHealth {
  /**
   * Healthy GPUs of the standby AZ now, as the leader judged them (nodes HEALTHY and taking
   * traffic); null when not known (then no step is judged `unhealthy`).
   */
  healthy: number | null;
  /** Groups judged failed earlier in this incident (group → its failure): never woken or counted serving again. */
  failed: Readonly<Record<string, WakeFailure>>;
}

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
 * shows them now, with the leader's word on their health. Never wakes more than one new step
 * per call: each step is its own fenced call, recorded on its own.
 */
export function planWake(steps: WakeGroupView[][], s: WakeFollowSettings, now: number, health: WakeHealth = { healthy: null, failed: {} }): WakePlan {
  const n = steps.length;
  const names = (i: number): string[] => steps[i].map((g) => g.name);
  const wokenAt = (i: number): number | undefined => {
    const ts = steps[i].map((g) => g.wokenAt).filter((t): t is number => t !== null);
    return ts.length ? Math.min(...ts) : undefined;
  };
  const healthyBound = s.healthyBoundMs ?? DEFAULT_HEALTHY_BOUND_MS;
  /** A step's failure: recorded earlier in the incident, in service but never healthy within the bound, or its launches'. */
  const failureOf = (i: number): WakeFailure | null => {
    const recorded = steps[i].map((g) => health.failed[g.name]).find((f) => f !== undefined);
    if (recorded && steps[i].every((g) => health.failed[g.name] !== undefined)) return recorded;
    if (steps[i].some((g) => g.inService > 0)) {
      const at = wokenAt(i);
      if (health.healthy !== 0 || at === undefined || now - at < healthyBound) return null;
      const inService = steps[i].reduce((a, g) => a + g.inService, 0);
      return {
        class: "unhealthy",
        group: names(i).join(","),
        message: `${inService} in service, no standby node HEALTHY ${Math.round((now - at) / 1000)} s after the wake (bound ${Math.round(healthyBound / 1000)} s)`,
        at: at + healthyBound,
      };
    }
    return stepFailure(steps[i], s, now);
  };
  let top = -1;
  steps.forEach((st, i) => {
    if (st.some((g) => g.woken)) top = i;
  });
  const failures = steps.map((_, i) => (i <= top ? failureOf(i) : null));
  const first = failures.find((f): f is WakeFailure => f !== null);
  // Judged unhealthy by this call: the reconciler records them so they stay failed (their nodes may heal later, or the fallback's count).
  const unhealthy = failures.filter((f, i): f is WakeFailure => f?.class === "unhealthy" && !steps[i].every((g) => health.failed[g.name]));
  const base = (phase: WakeReport["phase"], step: number): WakeReport => ({
    phase, step, steps: n, groups: names(step),
    ...(first ? { failure: first } : {}),
    ...(wokenAt(step) !== undefined ? { stepWokenAt: wokenAt(step) } : {}),
    ...(unhealthy.length ? { unhealthy } : {}),
  });
  let servingAt = steps.findIndex((st, i) => failures[i] === null && st.some((g) => g.inService > 0));
  // Healthy standby capacity with no other step in service: a step recorded failed came good after all (its nodes repaired, a slow boot).
  if (servingAt < 0 && (health.healthy ?? 0) > 0) servingAt = steps.findIndex((st) => st.some((g) => g.inService > 0));
  if (servingAt >= 0) {
    return { wake: top < 0 ? 0 : null, report: base("serving", servingAt), detail: `serving: ${steps[servingAt].filter((g) => g.inService > 0).map((g) => `${g.name} ${g.inService} in service`).join(", ")}` };
  }
  if (top < 0) return { wake: 0, report: { ...base("waiting", 0), stepWokenAt: now }, detail: `waking ${names(0).join(",")}` };
  const failure = failures[top];
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

/** The followed wake in the `actuation` hash, for `llm-ha status` and the next term: where it stands and why. */
export function wakeReportFields(w: WakeReport): Record<string, string | number> {
  return {
    "standby.phase": w.phase,
    "standby.step": `${w.step + 1}/${w.steps}`,
    "standby.groups": w.groups.join(","),
    "standby.failure": w.failure ? `${w.failure.class} on ${w.failure.group}: ${w.failure.message}`.slice(0, 300) : "",
    "standby.failureAt": w.failure?.at ?? "",
    "standby.stepWokenAt": w.stepWokenAt ?? "",
  };
}
