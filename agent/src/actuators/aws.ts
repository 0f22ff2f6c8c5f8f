/**
 * The real cluster's actuator: EC2 Auto Scaling for the standby AZ's GPU groups, ARC zonal
 * shift for the zones' load balancers (AWS SDK v3 clients; see docs/actuators.md).
 *
 * Every action reads first and writes only what differs from the desired state, so the
 * controller can re-assert it every period: a second wake is `already` with one read and
 * no write. State that a later leader needs lives in AWS, not in this process: the sizes a
 * group had before it was woken are an ASG tag (`llm-ha:pre-wake`), and a shift llm-ha
 * started carries a comment that starts with `llm-ha `. Tokens are checked by the gate
 * (gate.ts) before anything here runs; the token and reason go into the shift comment.
 */
import {
  AutoScalingClient,
  CreateOrUpdateTagsCommand,
  DeleteTagsCommand,
  DescribeAutoScalingGroupsCommand,
  DescribeScheduledActionsCommand,
  ResumeProcessesCommand,
  SuspendProcessesCommand,
  UpdateAutoScalingGroupCommand,
  type AutoScalingGroup,
} from "@aws-sdk/client-auto-scaling";
import { Counter, type Registry } from "prom-client";
import { CronError, lastFiring, parseCron, Zone } from "../../../contracts/cron";
import type { Logger } from "../util/log";
// To use the official client once the registry carries it, change only this line to
// `from "@aws-sdk/client-arc-zonal-shift"` (same class, command and field names).
import {
  ARCZonalShiftClient,
  CancelZonalShiftCommand,
  GetManagedResourceCommand,
  ListZonalShiftsCommand,
  StartZonalShiftCommand,
  UpdateZonalShiftCommand,
  type ZonalShiftSummary,
} from "./arc-zonal-shift";
import { LOAD_BALANCER_ARN } from "../../../contracts/arn";
import { classifyError, errorName, withRetry, type RetrySettings } from "./retry";
import type { ActionContext, ActionName, ActionOutcome, ActionResult, Actuator, ShiftContext } from "./types";

/** ASG tag holding `min/max/desired@<wake epoch ms>` from before the wake, for whichever leader releases. */
export const PRE_WAKE_TAG = "llm-ha:pre-wake";
/** The Auto Scaling process the standby schedule runs through. */
export const SCHEDULED_ACTIONS = "ScheduledActions";
/** Shift comments start with this; only such shifts are extended or cancelled. */
export const SHIFT_COMMENT_PREFIX = "llm-ha ";
/** ARC's longest expiry: 72 h. */
export const MAX_SHIFT_EXPIRY_MS = 72 * 3_600_000;

export const AWS_CALLS_METRIC = "llmha_actuator_aws_calls_total";

export const AWS_OPERATIONS = [
  "DescribeAutoScalingGroups",
  "CreateOrUpdateTags",
  "SuspendProcesses",
  "UpdateAutoScalingGroup",
  "ResumeProcesses",
  "DeleteTags",
  "DescribeScheduledActions",
  "GetManagedResource",
  "ListZonalShifts",
  "StartZonalShift",
  "UpdateZonalShift",
  "CancelZonalShift",
] as const;
export type AwsOperation = (typeof AWS_OPERATIONS)[number];

export interface StandbyGroup {
  /** Auto Scaling group name (an EKS managed node group's ASG). */
  name: string;
  /** Nodes to run while woken: min and desired are raised to it, max at least to it. */
  wakeSize: number;
}

/** A malformed `aws` setting; `variable` names it (`LLMHA_STANDBY_ASGS`…). */
export class ActuatorSettingError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
    this.name = "ActuatorSettingError";
  }
}

/** An API call that failed for good (not retryable, or out of attempts); `cause` is the SDK's error. */
export class AwsCallError extends Error {
  constructor(
    readonly operation: AwsOperation,
    readonly attempts: number,
    cause: unknown,
  ) {
    super(`${operation} failed after ${attempts} attempt${attempts > 1 ? "s" : ""}: ${errorName(cause)}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "AwsCallError";
  }
}

/** What an action cannot start without (no groups, no resources, unknown AZ id): `failed`, no call made. */
export class MissingIdentifierError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MissingIdentifierError";
  }
}

const ASG_NAME = /^[^,=\s][^,=]{0,254}$/;
const AZ_NAME = /^[a-z]{2}(-[a-z]+)+-\d+[a-z]$/;
const AZ_ID = /^[a-z]{2,}\d*-az\d+$/;

function entries(variable: string, value: string, what: string): [string, string][] {
  const parts = value.split(",").map((s) => s.trim()).filter((s) => s !== "");
  if (parts.length === 0) throw new ActuatorSettingError(variable, `is empty; expected ${what}`);
  return parts.map((p) => {
    const i = p.indexOf("=");
    if (i <= 0 || i === p.length - 1) throw new ActuatorSettingError(variable, `entry ${JSON.stringify(p)} is not ${what}`);
    return [p.slice(0, i).trim(), p.slice(i + 1).trim()];
  });
}

/** `LLMHA_STANDBY_ASGS`: `asg-name=wakeSize[,…]`, wake sizes ≥ 1, no group twice. */
export function parseStandbyGroups(value: string, variable = "LLMHA_STANDBY_ASGS"): StandbyGroup[] {
  const seen = new Set<string>();
  return entries(variable, value, "asg-name=wakeSize").map(([name, size]) => {
    if (!ASG_NAME.test(name)) throw new ActuatorSettingError(variable, `${JSON.stringify(name)} is not an Auto Scaling group name`);
    if (!/^\d+$/.test(size) || Number(size) < 1 || Number(size) > 10_000) {
      throw new ActuatorSettingError(variable, `wake size of ${name} must be an integer from 1 to 10000, got ${JSON.stringify(size)}`);
    }
    if (seen.has(name)) throw new ActuatorSettingError(variable, `lists ${name} twice`);
    seen.add(name);
    return { name, wakeSize: Number(size) };
  });
}

/** `LLMHA_AZ_IDS`: `us-east-1a=use1-az1[,…]` (AZ names differ per account; ARC wants the id). */
export function parseAzIds(value: string, variable = "LLMHA_AZ_IDS"): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [az, id] of entries(variable, value, "az-name=az-id")) {
    if (!AZ_NAME.test(az)) throw new ActuatorSettingError(variable, `${JSON.stringify(az)} is not an availability zone name like us-east-1a`);
    if (!AZ_ID.test(id)) throw new ActuatorSettingError(variable, `${JSON.stringify(id)} (for ${az}) is not an AZ id like use1-az1`);
    if (az in out) throw new ActuatorSettingError(variable, `lists ${az} twice`);
    out[az] = id;
  }
  return out;
}

/** `LLMHA_SHIFT_RESOURCES` entries must be load balancer ARNs (ARC shifts ALBs and NLBs). */
export function checkShiftResources(arns: readonly string[], variable = "LLMHA_SHIFT_RESOURCES"): void {
  for (const a of arns) {
    if (!LOAD_BALANCER_ARN.test(a)) throw new ActuatorSettingError(variable, `${JSON.stringify(a)} is not a load balancer ARN (arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/net/<name>/<id>)`);
  }
}

/** ARC's `expiresIn` for a duration: whole minutes rounded up (`45m`), whole hours as `2h`, 1 m to 72 h. */
export function expiresIn(ms: number): string {
  const minutes = Math.min(MAX_SHIFT_EXPIRY_MS / 60_000, Math.max(1, Math.ceil(ms / 60_000)));
  return minutes % 60 === 0 ? `${minutes / 60}h` : `${minutes}m`;
}

/** The shift comment: names llm-ha, the fencing token and the reason; ARC keeps 128 characters. */
export function shiftComment(ctx: ActionContext): string {
  const c = `${SHIFT_COMMENT_PREFIX}token=${ctx.token} ${ctx.reason}`;
  return c.length <= 128 ? c : `${c.slice(0, 127)}…`;
}

export interface AwsActuatorOptions {
  /** Region of the groups and load balancers. Required. */
  region: string;
  /** The standby AZ's groups (`LLMHA_STANDBY_ASGS`). Empty: wake/release fail with a clear detail. */
  standbyGroups: StandbyGroup[];
  /** Load balancer ARNs to shift (`LLMHA_SHIFT_RESOURCES`). Empty: shifts fail with a clear detail. */
  shiftResources: string[];
  /** AZ name → AZ id (`LLMHA_AZ_IDS`). */
  azIds: Record<string, string>;
  log: Logger;
  /** The AZ the standby groups are in (`LLMHA_STANDBY_AZ`); waking another AZ then fails. Default: not checked. */
  standbyAz?: string;
  /** Default: a client for `region` with `maxAttempts: 1` (retries happen here, counted). */
  autoScaling?: AutoScalingClient;
  /** Default: a client for `region` with `maxAttempts: 1`. */
  arc?: ARCZonalShiftClient;
  /** Default `DEFAULT_RETRY` (4 attempts, 200 ms base, 5 s cap). */
  retry?: Partial<RetrySettings>;
  /** Registry for `llmha_actuator_aws_calls_total`. Default none. */
  registry?: Registry;
  /** Wall clock, for shift expiries. Default `Date.now`. */
  now?: () => number;
}

/** Sizes of one group and whether the schedule is held off. */
interface GroupState {
  min: number;
  max: number;
  desired: number;
  scheduleSuspended: boolean;
  /** `min/max/desired` from before our wake, when we woke it. */
  preWake?: string;
}

type Sizes = Pick<GroupState, "min" | "max" | "desired">;
const fmtSizes = (s: Sizes) => `${s.min}/${s.max}/${s.desired}`;

/** The pre-wake tag: sizes, and (since the schedule-aware hand-back) when the wake happened. */
function parsePreWake(v: string): (Sizes & { wokenAt: number | null }) | null {
  const m = /^(\d+)\/(\d+)\/(\d+)(?:@(\d+))?$/.exec(v);
  return m ? { min: Number(m[1]), max: Number(m[2]), desired: Number(m[3]), wokenAt: m[4] === undefined ? null : Number(m[4]) } : null;
}

/** The schedule's say on a group's sizes now: its scheduled action that fired last. */
interface ScheduleSay {
  name: string;
  firedAt: number;
  sizes: Partial<Sizes>;
}

function groupState(g: AutoScalingGroup): GroupState {
  return {
    min: g.MinSize ?? 0,
    max: g.MaxSize ?? 0,
    desired: g.DesiredCapacity ?? 0,
    scheduleSuspended: (g.SuspendedProcesses ?? []).some((p) => p.ProcessName === SCHEDULED_ACTIONS),
    preWake: g.Tags?.find((t) => t.Key === PRE_WAKE_TAG)?.Value,
  };
}

function sizeChange(from: Sizes, to: Sizes): string {
  return (["min", "max", "desired"] as const).filter((k) => from[k] !== to[k]).map((k) => `${k} ${from[k]}→${to[k]}`).join(" ");
}

/** The last part of a load balancer ARN, for details: `net/l1-a/0123…`. */
const shortArn = (arn: string) => arn.replace(/^.*:loadbalancer\//, "");

/** Calls made by one action, with what each returned. */
class CallTrace {
  count = 0;
  readonly lines: string[] = [];

  summary(): string {
    return this.lines.length ? `calls: ${this.lines.join(", ")}` : "no calls";
  }
}

export class AwsActuator implements Actuator {
  readonly kind = "aws";
  private readonly asg: AutoScalingClient;
  private readonly arc: ARCZonalShiftClient;
  private readonly log: Logger;
  private readonly apiCalls?: Counter<"operation" | "result">;
  private readonly now: () => number;
  /** Load balancer ARN → AZ ids it is deployed in (placement does not change; read once). */
  private readonly placement = new Map<string, Set<string>>();

  constructor(private readonly o: AwsActuatorOptions) {
    checkShiftResources(o.shiftResources);
    this.asg = o.autoScaling ?? new AutoScalingClient({ region: o.region, maxAttempts: 1 });
    this.arc = o.arc ?? new ARCZonalShiftClient({ region: o.region, maxAttempts: 1 });
    this.log = o.log.child({ component: "actuator-aws" });
    this.now = o.now ?? Date.now;
    if (o.registry) {
      // One series set per registry, shared by every actuator built on it.
      const existing = o.registry.getSingleMetric(AWS_CALLS_METRIC) as Counter<"operation" | "result"> | undefined;
      this.apiCalls = existing ?? new Counter({
        name: AWS_CALLS_METRIC,
        help: "AWS API requests the actuator sent, retries included, by result (ok, throttled, error)",
        labelNames: ["operation", "result"],
        registers: [o.registry],
      });
      for (const operation of AWS_OPERATIONS) for (const result of ["ok", "throttled", "error"]) this.apiCalls.inc({ operation, result }, 0);
    }
  }

  wakeStandby(az: string, _ctx: ActionContext): Promise<ActionResult> {
    return this.act("standby.wake", az, async (trace) => {
      const groups = this.groupsOf(az);
      const states = await this.describe(trace, groups);
      const changes: string[] = [];
      for (const g of groups) {
        const cur = states.get(g.name)!;
        const target = { min: Math.max(cur.min, g.wakeSize), max: Math.max(cur.max, g.wakeSize), desired: Math.max(cur.desired, g.wakeSize) };
        const resize = sizeChange(cur, target);
        if (!resize && cur.scheduleSuspended) continue;
        // Order matters for a leader that dies half-way: the pre-wake sizes are recorded
        // before anything changes, and the schedule is held off before the resize so a
        // scale-down action cannot land between them.
        if (cur.preWake === undefined) {
          await this.call(trace, "CreateOrUpdateTags", () =>
            this.asg.send(
              new CreateOrUpdateTagsCommand({
                Tags: [{ ResourceId: g.name, ResourceType: "auto-scaling-group", Key: PRE_WAKE_TAG, Value: `${fmtSizes(cur)}@${this.now()}`, PropagateAtLaunch: false }],
              }),
            ),
          );
        }
        if (!cur.scheduleSuspended) {
          await this.call(trace, "SuspendProcesses", () =>
            this.asg.send(new SuspendProcessesCommand({ AutoScalingGroupName: g.name, ScalingProcesses: [SCHEDULED_ACTIONS] })),
          );
        }
        if (resize) {
          await this.call(trace, "UpdateAutoScalingGroup", () =>
            this.asg.send(new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: g.name, MinSize: target.min, MaxSize: target.max, DesiredCapacity: target.desired })),
          );
        }
        changes.push(`${g.name} ${resize || "sizes kept"}${cur.scheduleSuspended ? "" : ", scheduled actions suspended"}`);
      }
      if (changes.length === 0) return { outcome: "already", detail: `${groups.map((g) => `${g.name} ≥ ${g.wakeSize}`).join(", ")}, scheduled actions suspended` };
      return { outcome: "applied", detail: changes.join("; ") };
    });
  }

  releaseStandby(az: string, _ctx: ActionContext): Promise<ActionResult> {
    return this.act("standby.release", az, async (trace) => {
      const groups = this.groupsOf(az);
      const states = await this.describe(trace, groups);
      const changes: string[] = [];
      for (const g of groups) {
        const cur = states.get(g.name)!;
        if (cur.preWake === undefined) continue; // not woken by llm-ha (or already handed back)
        const pre = parsePreWake(cur.preWake);
        if (!pre) throw new ActuatorSettingError(PRE_WAKE_TAG, `${g.name} has an unreadable ${PRE_WAKE_TAG} tag ${JSON.stringify(cur.preWake)}; expected min/max/desired@ms`);
        // Hand back to the schedule: the sizes from before the wake, unless a scheduled
        // action came due while the group was held (e.g. the morning scale-up during a
        // night incident) — then the sizes that action sets, as if it had run.
        const say = pre.wokenAt === null ? null : await this.scheduleSay(trace, g.name, pre.wokenAt);
        const before: Sizes = say ? { min: say.sizes.min ?? pre.min, max: say.sizes.max ?? pre.max, desired: say.sizes.desired ?? pre.desired } : pre;
        const resize = sizeChange(cur, before);
        if (resize) {
          await this.call(trace, "UpdateAutoScalingGroup", () =>
            this.asg.send(new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: g.name, MinSize: before.min, MaxSize: before.max, DesiredCapacity: before.desired })),
          );
        }
        if (cur.scheduleSuspended) {
          await this.call(trace, "ResumeProcesses", () =>
            this.asg.send(new ResumeProcessesCommand({ AutoScalingGroupName: g.name, ScalingProcesses: [SCHEDULED_ACTIONS] })),
          );
        }
        // Last: until the tag is gone, a retry (by us or the next leader) finishes the hand-back.
        await this.call(trace, "DeleteTags", () =>
          this.asg.send(new DeleteTagsCommand({ Tags: [{ ResourceId: g.name, ResourceType: "auto-scaling-group", Key: PRE_WAKE_TAG, Value: cur.preWake }] })),
        );
        const source = say ? ` (as ${say.name}, due ${new Date(say.firedAt).toISOString()} while woken, set them)` : "";
        changes.push(`${g.name} ${resize || "sizes kept"}${source}${cur.scheduleSuspended ? ", scheduled actions resumed" : ""}`);
      }
      if (changes.length === 0) return { outcome: "already", detail: `no ${PRE_WAKE_TAG} tag on ${groups.map((g) => g.name).join(", ")}: with the schedule` };
      return { outcome: "applied", detail: changes.join("; ") };
    });
  }

  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult> {
    return this.act("shift.start", az, async (trace) => {
      const azId = this.azIdOf(az);
      const resources = await this.resourcesIn(trace, azId);
      const expires = expiresIn(ctx.expiresInMs);
      const comment = shiftComment(ctx);
      const changes: string[] = [];
      const held: string[] = [];
      for (const r of resources) {
        const active = await this.activeShifts(trace, r);
        const ours = active.find((s) => s.awayFrom === azId && s.comment.startsWith(SHIFT_COMMENT_PREFIX));
        if (ours) {
          // Re-asserted every period: extend only once half the asked-for time is used up,
          // so ARC sees one write per half expiry, not one per controller period.
          const left = ours.expiryTime.getTime() - this.now();
          if (left >= ctx.expiresInMs / 2) {
            held.push(`${shortArn(r)} shift ${ours.zonalShiftId} has ${Math.round(left / 60_000)}m left`);
            continue;
          }
          await this.call(trace, "UpdateZonalShift", () => this.arc.send(new UpdateZonalShiftCommand({ zonalShiftId: ours.zonalShiftId, expiresIn: expires, comment })));
          changes.push(`${shortArn(r)} shift ${ours.zonalShiftId} extended to ${expires}`);
          continue;
        }
        const theirs = active.find((s) => s.awayFrom === azId);
        if (theirs) {
          // An operator's (or a practice run's) shift already moves this AZ's traffic; leave it to them.
          held.push(`${shortArn(r)} already shifted away from ${azId} by ${theirs.zonalShiftId} (${JSON.stringify(theirs.comment)})`);
          continue;
        }
        const out = await this.call(trace, "StartZonalShift", () =>
          this.arc.send(new StartZonalShiftCommand({ resourceIdentifier: r, awayFrom: azId, expiresIn: expires, comment })),
        );
        changes.push(`${shortArn(r)} shifted away from ${azId} for ${expires} (${out.zonalShiftId})`);
      }
      if (changes.length === 0) return { outcome: "already", detail: held.join("; ") };
      return { outcome: "applied", detail: [...changes, ...held].join("; ") };
    });
  }

  cancelZonalShift(az: string, _ctx: ActionContext): Promise<ActionResult> {
    return this.act("shift.cancel", az, async (trace) => {
      const azId = this.azIdOf(az);
      if (this.o.shiftResources.length === 0) throw new MissingIdentifierError("no load balancers to shift (LLMHA_SHIFT_RESOURCES is empty)");
      const changes: string[] = [];
      // Every configured resource, no placement lookup: a cancel must work even when
      // GetManagedResource does not.
      for (const r of this.o.shiftResources) {
        const ours = (await this.activeShifts(trace, r)).filter((s) => s.awayFrom === azId && s.comment.startsWith(SHIFT_COMMENT_PREFIX));
        for (const s of ours) {
          await this.call(trace, "CancelZonalShift", () => this.arc.send(new CancelZonalShiftCommand({ zonalShiftId: s.zonalShiftId })));
          changes.push(`${shortArn(r)} shift ${s.zonalShiftId} cancelled`);
        }
      }
      if (changes.length === 0) return { outcome: "already", detail: `no active llm-ha shift away from ${azId}` };
      return { outcome: "applied", detail: changes.join("; ") };
    });
  }

  async close(): Promise<void> {
    if (!this.o.autoScaling) this.asg.destroy();
    if (!this.o.arc) this.arc.destroy();
  }

  /** Runs one action: errors become `failed`; every result names the calls it made. */
  private async act(
    action: ActionName,
    az: string,
    body: (trace: CallTrace) => Promise<{ outcome: ActionOutcome; detail: string }>,
  ): Promise<ActionResult> {
    const started = performance.now();
    const trace = new CallTrace();
    let outcome: ActionOutcome;
    let detail: string;
    try {
      ({ outcome, detail } = await body(trace));
    } catch (err) {
      outcome = "failed";
      detail = err instanceof Error ? err.message : String(err);
    }
    return { action, az, outcome, calls: trace.count, detail: `${detail} [${trace.summary()}]`, durationMs: performance.now() - started };
  }

  /** One API call with retries; each attempt is counted, logged at debug and recorded in the trace. */
  private async call<T>(trace: CallTrace, op: AwsOperation, send: () => Promise<T>): Promise<T> {
    const failures: string[] = [];
    try {
      const out = await withRetry(send, {
        settings: this.o.retry,
        onAttempt: (a) => {
          trace.count++;
          const result = a.error === null ? "ok" : classifyError(a.error) === "throttled" ? "throttled" : "error";
          this.apiCalls?.inc({ operation: op, result });
          if (a.error !== null) {
            failures.push(errorName(a.error));
            this.log.debug({ operation: op, attempt: a.attempt, err: errorName(a.error), retrying: a.retrying, delayMs: a.delayMs }, "aws call failed");
          } else {
            this.log.debug({ operation: op, attempt: a.attempt }, "aws call ok");
          }
        },
      });
      trace.lines.push(`${op} ${[...failures, "ok"].join("→")}`);
      return out;
    } catch (err) {
      trace.lines.push(`${op} ${failures.join("→")}`);
      throw new AwsCallError(op, failures.length, err);
    }
  }

  private groupsOf(az: string): StandbyGroup[] {
    if (this.o.standbyGroups.length === 0) throw new MissingIdentifierError("no standby Auto Scaling groups configured (LLMHA_STANDBY_ASGS is empty)");
    if (this.o.standbyAz !== undefined && az !== this.o.standbyAz) {
      throw new MissingIdentifierError(`no standby groups in ${az}: LLMHA_STANDBY_ASGS lists ${this.o.standbyAz}'s groups`);
    }
    return this.o.standbyGroups;
  }

  private azIdOf(az: string): string {
    const id = this.o.azIds[az];
    if (id === undefined) throw new MissingIdentifierError(`no AZ id for ${az} (LLMHA_AZ_IDS has ${Object.keys(this.o.azIds).join(", ") || "none"})`);
    return id;
  }

  private async describe(trace: CallTrace, groups: StandbyGroup[]): Promise<Map<string, GroupState>> {
    const states = new Map<string, GroupState>();
    let NextToken: string | undefined;
    do {
      const page = await this.call(trace, "DescribeAutoScalingGroups", () =>
        this.asg.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: groups.map((g) => g.name), ...(NextToken ? { NextToken } : {}) })),
      );
      for (const g of page.AutoScalingGroups ?? []) if (g.AutoScalingGroupName) states.set(g.AutoScalingGroupName, groupState(g));
      NextToken = page.NextToken;
    } while (NextToken);
    const missing = groups.filter((g) => !states.has(g.name)).map((g) => g.name);
    if (missing.length) throw new MissingIdentifierError(`Auto Scaling group${missing.length > 1 ? "s" : ""} ${missing.join(", ")} not found in ${this.o.region}`);
    return states;
  }

  /**
   * The group's recurring scheduled action that fired last, if that was after `since` (the
   * wake). Actions with a cron this parser does not take are skipped, with a log line.
   */
  private async scheduleSay(trace: CallTrace, group: string, since: number): Promise<ScheduleSay | null> {
    const now = this.now();
    let best: ScheduleSay | null = null;
    let NextToken: string | undefined;
    do {
      const page = await this.call(trace, "DescribeScheduledActions", () =>
        this.asg.send(new DescribeScheduledActionsCommand({ AutoScalingGroupName: group, ...(NextToken ? { NextToken } : {}) })),
      );
      for (const a of page?.ScheduledUpdateGroupActions ?? []) {
        if (!a.Recurrence) continue;
        if (a.StartTime && a.StartTime.getTime() > now) continue;
        if (a.EndTime && a.EndTime.getTime() < since) continue;
        let firedAt: number | null;
        try {
          firedAt = lastFiring(parseCron(a.Recurrence), new Zone(a.TimeZone ?? "UTC"), now, now - since);
        } catch (err) {
          if (!(err instanceof CronError || err instanceof RangeError)) throw err;
          this.log.warn({ group, action: a.ScheduledActionName, recurrence: a.Recurrence, err: err.message }, "scheduled action not understood; ignored for the hand-back");
          continue;
        }
        if (firedAt === null || firedAt < since || (best && firedAt <= best.firedAt)) continue;
        const sizes: Partial<Sizes> = {};
        if (a.MinSize !== undefined) sizes.min = a.MinSize;
        if (a.MaxSize !== undefined) sizes.max = a.MaxSize;
        if (a.DesiredCapacity !== undefined) sizes.desired = a.DesiredCapacity;
        best = { name: a.ScheduledActionName ?? "a scheduled action", firedAt, sizes };
      }
      NextToken = page?.NextToken;
    } while (NextToken);
    return best;
  }

  /** The configured load balancers deployed in `azId` (ARC's `appliedWeights` keys). */
  private async resourcesIn(trace: CallTrace, azId: string): Promise<string[]> {
    if (this.o.shiftResources.length === 0) throw new MissingIdentifierError("no load balancers to shift (LLMHA_SHIFT_RESOURCES is empty)");
    for (const r of this.o.shiftResources) {
      if (this.placement.has(r)) continue;
      const res = await this.call(trace, "GetManagedResource", () => this.arc.send(new GetManagedResourceCommand({ resourceIdentifier: r })));
      this.placement.set(r, new Set(Object.keys(res.appliedWeights ?? {})));
    }
    const inAz = this.o.shiftResources.filter((r) => this.placement.get(r)?.has(azId));
    if (inAz.length === 0) throw new MissingIdentifierError(`none of the ${this.o.shiftResources.length} load balancers in LLMHA_SHIFT_RESOURCES is deployed in ${azId}`);
    return inAz;
  }

  private async activeShifts(trace: CallTrace, resourceIdentifier: string): Promise<ZonalShiftSummary[]> {
    const out: ZonalShiftSummary[] = [];
    let nextToken: string | undefined;
    do {
      const page = await this.call(trace, "ListZonalShifts", () =>
        this.arc.send(new ListZonalShiftsCommand({ resourceIdentifier, status: "ACTIVE", ...(nextToken ? { nextToken } : {}) })),
      );
      out.push(...(page.items ?? []));
      nextToken = page.nextToken;
    } while (nextToken);
    return out;
  }
}
