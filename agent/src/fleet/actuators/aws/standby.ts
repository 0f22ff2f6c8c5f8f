/**
 * The standby AZ's GPU groups on EC2 Auto Scaling: wake (raise to the wake size, schedule
 * held off) and release (hand back to the schedule). The sizes a group had before the wake
 * live in an ASG tag (`llm-ha:pre-wake`), not in this process, so whichever leader comes
 * next can finish or undo a wake. Both read first and write only what differs.
 */
import {
  CreateOrUpdateTagsCommand,
  DeleteTagsCommand,
  DescribeAutoScalingGroupsCommand,
  DescribeScalingActivitiesCommand,
  DescribeScheduledActionsCommand,
  ResumeProcessesCommand,
  SuspendProcessesCommand,
  UpdateAutoScalingGroupCommand,
  type AutoScalingClient,
  type AutoScalingGroup,
} from "@aws-sdk/client-auto-scaling";
import { CronError, lastFiring, parseCron, Zone } from "../../../../../contracts/cron";
import type { Logger } from "../../../util/log";
import { MissingIdentifierError, type ActionBody, type AwsCalls, type CallTrace } from "./calls";
import { ActuatorSettingError, type StandbyGroup } from "./settings";
import { DEFAULT_WAKE_BOUND_MS, planWake, type WakeGroupView, type WakeHealth } from "../wake-follow";
import type { ForeignAction } from "../types";

/** ASG tag holding `min/max/desired@<wake epoch ms>` from before the wake, for whichever leader releases. */
export const PRE_WAKE_TAG = "llm-ha:pre-wake";
/** The Auto Scaling process the standby schedule runs through. */
export const SCHEDULED_ACTIONS = "ScheduledActions";

/** The part of `AwsActuatorOptions` the standby actions read (the actuator passes its options as they are). */
export interface StandbySettings {
  region: string;
  standbyGroups: StandbyGroup[];
  standbyAz?: string;
  /**
   * Woken one at a time, in order, when the step before failed to launch (`LLMHA_STANDBY_FALLBACK`):
   * a second group of another instance type in the standby AZ, then another AZ's spare group.
   */
  standbyFallback?: StandbyGroup[];
  /** A woken step with nothing in service this long has failed (`LLMHA_STANDBY_WAKE_BOUND_MS`). Default 900000. */
  wakeBoundMs?: number;
  /** A woken step in service with no healthy standby node this long has failed (`LLMHA_STANDBY_HEALTHY_BOUND_MS`). Default 600000. */
  healthyBoundMs?: number;
}

/** Instance lifecycle states of a launch that found capacity and is on its way. */
const PENDING_STATES = /^(Pending|Warmed:Pending)/;

export interface StandbyDeps {
  asg: AutoScalingClient;
  calls: AwsCalls;
  log: Logger;
  now: () => number;
}

/** Sizes of one group and whether the schedule is held off. */
interface GroupState {
  min: number;
  max: number;
  desired: number;
  scheduleSuspended: boolean;
  /** `min/max/desired` from before our wake, when we woke it. */
  preWake?: string;
  inService: number;
  pending: number;
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
    inService: (g.Instances ?? []).filter((i) => i.LifecycleState === "InService").length,
    pending: (g.Instances ?? []).filter((i) => PENDING_STATES.test(i.LifecycleState ?? "")).length,
  };
}

function sizeChange(from: Sizes, to: Sizes): string {
  return (["min", "max", "desired"] as const).filter((k) => from[k] !== to[k]).map((k) => `${k} ${from[k]}→${to[k]}`).join(" ");
}

export class StandbyActions {
  constructor(
    private readonly o: StandbySettings,
    private readonly d: StandbyDeps,
  ) {}

  /**
   * Desired state plus the follow (wake-follow.ts): raise the woken steps' groups (a repeat
   * re-asserts them), read how their launches went (instances, scaling activities), and wake
   * the next step of the fallback order when the last one failed — one new step per call, so
   * each goes through the fencing gate and is recorded on its own.
   */
  async wake(az: string, trace: CallTrace, health?: WakeHealth): Promise<ActionBody> {
    const primary = this.groupsOf(az);
    const fallback = (this.o.standbyFallback ?? []).filter((f) => !primary.some((g) => g.name === f.name));
    const states = await this.describe(trace, primary, fallback);
    const steps: StandbyGroup[][] = [primary, ...fallback.filter((f) => states.has(f.name)).map((f) => [f])];
    const missing = fallback.filter((f) => !states.has(f.name)).map((f) => f.name);
    const views: WakeGroupView[][] = [];
    let unreadable: string | null = null;
    for (const step of steps) {
      const row: WakeGroupView[] = [];
      for (const g of step) {
        const cur = states.get(g.name)!;
        const pre = cur.preWake === undefined ? null : parsePreWake(cur.preWake);
        const woken = cur.preWake !== undefined;
        const wokenAt = pre?.wokenAt ?? null;
        // Launches are read only while they matter: woken, nothing pending or in service.
        let failures: { at: number; message: string }[] = [];
        if (woken && cur.inService === 0 && cur.pending === 0) {
          try {
            failures = await this.failedLaunches(trace, g.name, wokenAt);
          } catch (err) {
            // Not readable (an older role without autoscaling:DescribeScalingActivities, an
            // outage): the wake itself still holds; the bound decides the fallback.
            unreadable = err instanceof Error ? err.message : String(err);
          }
        }
        row.push({ name: g.name, woken, wokenAt, inService: cur.inService, pending: cur.pending, failures });
      }
      views.push(row);
    }
    const plan = planWake(views, { boundMs: this.o.wakeBoundMs ?? DEFAULT_WAKE_BOUND_MS, healthyBoundMs: this.o.healthyBoundMs }, this.d.now(), health);
    let top = -1;
    views.forEach((row, i) => {
      if (row.some((g) => g.woken)) top = i;
    });
    const upTo = Math.max(top, plan.wake ?? -1, 0);
    const changes: string[] = [];
    for (let i = 0; i <= upTo; i++) {
      for (const g of steps[i]) {
        const change = await this.raise(trace, g, states.get(g.name)!);
        if (change) changes.push(change);
      }
    }
    let note = missing.length ? ` (fallback group${missing.length > 1 ? "s" : ""} ${missing.join(", ")} not found in ${this.o.region}: skipped)` : "";
    if (unreadable) note += ` (scaling activities unreadable, following instance counts and the bound only: ${unreadable})`;
    if (plan.report.phase === "unavailable") return { outcome: "failed", detail: `${plan.detail}${note}`, wake: plan.report };
    if (changes.length === 0) {
      return { outcome: "already", detail: `${steps.slice(0, upTo + 1).flat().map((g) => `${g.name} ≥ ${g.wakeSize}`).join(", ")}, scheduled actions suspended; ${plan.detail}${note}`, wake: plan.report };
    }
    return { outcome: "applied", detail: `${changes.join("; ")}; ${plan.detail}${note}`, wake: plan.report };
  }

  /** One group to its wake size, schedule held off; null when nothing differed. */
  private async raise(trace: CallTrace, g: StandbyGroup, cur: GroupState): Promise<string | null> {
    const target = { min: Math.max(cur.min, g.wakeSize), max: Math.max(cur.max, g.wakeSize), desired: Math.max(cur.desired, g.wakeSize) };
    const resize = sizeChange(cur, target);
    if (!resize && cur.scheduleSuspended) return null;
    // Order matters for a leader that dies half-way: the pre-wake sizes are recorded
    // before anything changes, and the schedule is held off before the resize so a
    // scale-down action cannot land between them.
    if (cur.preWake === undefined) {
      await this.d.calls.call(trace, "CreateOrUpdateTags", () =>
        this.d.asg.send(
          new CreateOrUpdateTagsCommand({
            Tags: [{ ResourceId: g.name, ResourceType: "auto-scaling-group", Key: PRE_WAKE_TAG, Value: `${fmtSizes(cur)}@${this.d.now()}`, PropagateAtLaunch: false }],
          }),
        ),
      );
    }
    if (!cur.scheduleSuspended) {
      await this.d.calls.call(trace, "SuspendProcesses", () =>
        this.d.asg.send(new SuspendProcessesCommand({ AutoScalingGroupName: g.name, ScalingProcesses: [SCHEDULED_ACTIONS] })),
      );
    }
    if (resize) {
      await this.d.calls.call(trace, "UpdateAutoScalingGroup", () =>
        this.d.asg.send(new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: g.name, MinSize: target.min, MaxSize: target.max, DesiredCapacity: target.desired })),
      );
    }
    return `${g.name} ${resize || "sizes kept"}${cur.scheduleSuspended ? "" : ", scheduled actions suspended"}`;
  }

  /**
   * Failed launches of a group since its wake (DescribeScalingActivities, newest first; one
   * page of 20 is plenty: the provider retries a failed launch every few tens of seconds).
   * A wake time is allowed 2 s of clock difference with AWS.
   */
  private async failedLaunches(trace: CallTrace, group: string, since: number | null): Promise<{ at: number; message: string }[]> {
    const page = await this.d.calls.call(trace, "DescribeScalingActivities", () =>
      this.d.asg.send(new DescribeScalingActivitiesCommand({ AutoScalingGroupName: group, MaxRecords: 20 })),
    );
    const from = since === null ? Number.NEGATIVE_INFINITY : since - 2000;
    return (page?.Activities ?? [])
      .filter((a) => (a.StatusCode === "Failed" || a.StatusCode === "Cancelled") && (a.StartTime?.getTime() ?? 0) >= from)
      .map((a) => ({ at: a.StartTime?.getTime() ?? 0, message: a.StatusMessage || a.Description || a.StatusCode || "launch failed" }))
      .sort((a, b) => a.at - b.at);
  }

  async release(az: string, trace: CallTrace): Promise<ActionBody> {
    const primary = this.groupsOf(az);
    const fallback = (this.o.standbyFallback ?? []).filter((f) => !primary.some((g) => g.name === f.name));
    const states = await this.describe(trace, primary, fallback);
    const groups = [...primary, ...fallback].filter((g) => states.has(g.name));
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
        await this.d.calls.call(trace, "UpdateAutoScalingGroup", () =>
          this.d.asg.send(new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: g.name, MinSize: before.min, MaxSize: before.max, DesiredCapacity: before.desired })),
        );
      }
      if (cur.scheduleSuspended) {
        await this.d.calls.call(trace, "ResumeProcesses", () =>
          this.d.asg.send(new ResumeProcessesCommand({ AutoScalingGroupName: g.name, ScalingProcesses: [SCHEDULED_ACTIONS] })),
        );
      }
      // Last: until the tag is gone, a retry (by us or the next leader) finishes the hand-back.
      await this.d.calls.call(trace, "DeleteTags", () =>
        this.d.asg.send(new DeleteTagsCommand({ Tags: [{ ResourceId: g.name, ResourceType: "auto-scaling-group", Key: PRE_WAKE_TAG, Value: cur.preWake }] })),
      );
      const source = say ? ` (as ${say.name}, due ${new Date(say.firedAt).toISOString()} while woken, set them)` : "";
      changes.push(`${g.name} ${resize || "sizes kept"}${source}${cur.scheduleSuspended ? ", scheduled actions resumed" : ""}`);
    }
    if (changes.length === 0) return { outcome: "already", detail: `no ${PRE_WAKE_TAG} tag on ${groups.map((g) => g.name).join(", ")}: with the schedule` };
    return { outcome: "applied", detail: changes.join("; ") };
  }

  /**
   * Groups in a state no llm-ha wake explains, from one read of the groups and, for a
   * group llm-ha did not wake, its schedule's last say: its scheduled actions held off with no
   * `llm-ha:pre-wake` tag; sizes other than the schedule last set; a fallback group (desired 0
   * until llm-ha wakes it) raised; a woken group raised past its wake or taken below it.
   */
  async foreign(trace: CallTrace): Promise<ForeignAction[]> {
    const fallback = this.o.standbyFallback ?? [];
    const all = [...this.o.standbyGroups, ...fallback.filter((f) => !this.o.standbyGroups.some((g) => g.name === f.name))];
    const states = await this.describe(trace, [], all);
    const az = this.o.standbyAz ?? null;
    const out: ForeignAction[] = [];
    for (const g of all) {
      const cur = states.get(g.name);
      if (!cur) continue;
      const seen = (why: string): void => {
        out.push({ kind: "standby", id: `${g.name}:${fmtSizes(cur)}:${cur.scheduleSuspended ? "held" : "scheduled"}`, az, detail: `${g.name} ${fmtSizes(cur)} (min/max/desired): ${why}` });
      };
      if (cur.preWake !== undefined) {
        const pre = parsePreWake(cur.preWake);
        const top = Math.max(g.wakeSize, pre?.max ?? 0);
        if (cur.desired > top || cur.max > top) seen(`raised past its wake (${g.wakeSize}, ${pre ? `${pre.max} before it` : "no readable pre-wake sizes"})`);
        else if (cur.desired < g.wakeSize) seen(`taken below its wake size ${g.wakeSize} while woken`);
        continue;
      }
      if (cur.scheduleSuspended) {
        seen("scheduled actions suspended with no llm-ha wake (no llm-ha:pre-wake tag)");
        continue;
      }
      if (fallback.some((f) => f.name === g.name) && !this.o.standbyGroups.some((p) => p.name === g.name)) {
        if (cur.desired > 0) seen("a fallback group raised with no llm-ha wake");
        continue;
      }
      // The schedule's last say within a week (a weekly schedule fires at least that often).
      const say = await this.scheduleSay(trace, g.name, this.d.now() - 8 * 86_400_000);
      if (!say) continue;
      const differs = (["min", "max", "desired"] as const).filter((k) => say.sizes[k] !== undefined && say.sizes[k] !== cur[k]);
      if (differs.length) seen(`differs from its schedule (${say.name} set ${differs.map((k) => `${k} ${say.sizes[k]}`).join(", ")}) with no llm-ha wake`);
    }
    return out;
  }

  private groupsOf(az: string): StandbyGroup[] {
    if (this.o.standbyGroups.length === 0) throw new MissingIdentifierError("no standby Auto Scaling groups configured (LLMHA_STANDBY_ASGS is empty)");
    if (this.o.standbyAz !== undefined && az !== this.o.standbyAz) {
      throw new MissingIdentifierError(`no standby groups in ${az}: LLMHA_STANDBY_ASGS lists ${this.o.standbyAz}'s groups`);
    }
    return this.o.standbyGroups;
  }

  /** The groups' states; a missing standby group fails the action, a missing fallback group is left out. */
  private async describe(trace: CallTrace, groups: StandbyGroup[], optional: StandbyGroup[] = []): Promise<Map<string, GroupState>> {
    const states = new Map<string, GroupState>();
    let NextToken: string | undefined;
    do {
      const page = await this.d.calls.call(trace, "DescribeAutoScalingGroups", () =>
        this.d.asg.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [...groups, ...optional].map((g) => g.name), ...(NextToken ? { NextToken } : {}) })),
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
    const now = this.d.now();
    let best: ScheduleSay | null = null;
    let NextToken: string | undefined;
    do {
      const page = await this.d.calls.call(trace, "DescribeScheduledActions", () =>
        this.d.asg.send(new DescribeScheduledActionsCommand({ AutoScalingGroupName: group, ...(NextToken ? { NextToken } : {}) })),
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
          this.d.log.warn({ group, action: a.ScheduledActionName, recurrence: a.Recurrence, err: err.message }, "scheduled action not understood; ignored for the hand-back");
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
}
