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
  DescribeScheduledActionsCommand,
  ResumeProcessesCommand,
  SuspendProcessesCommand,
  UpdateAutoScalingGroupCommand,
  type AutoScalingClient,
  type AutoScalingGroup,
} from "@aws-sdk/client-auto-scaling";
import { CronError, lastFiring, parseCron, Zone } from "../../../../contracts/cron";
import type { Logger } from "../../util/log";
import { MissingIdentifierError, type ActionBody, type AwsCalls, type CallTrace } from "./calls";
import { ActuatorSettingError, type StandbyGroup } from "./settings";

/** ASG tag holding `min/max/desired@<wake epoch ms>` from before the wake, for whichever leader releases. */
export const PRE_WAKE_TAG = "llm-ha:pre-wake";
/** The Auto Scaling process the standby schedule runs through. */
export const SCHEDULED_ACTIONS = "ScheduledActions";

/** The part of `AwsActuatorOptions` the standby actions read (the actuator passes its options as they are). */
export interface StandbySettings {
  region: string;
  standbyGroups: StandbyGroup[];
  standbyAz?: string;
}

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

export class StandbyActions {
  constructor(
    private readonly o: StandbySettings,
    private readonly d: StandbyDeps,
  ) {}

  async wake(az: string, trace: CallTrace): Promise<ActionBody> {
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
      changes.push(`${g.name} ${resize || "sizes kept"}${cur.scheduleSuspended ? "" : ", scheduled actions suspended"}`);
    }
    if (changes.length === 0) return { outcome: "already", detail: `${groups.map((g) => `${g.name} ≥ ${g.wakeSize}`).join(", ")}, scheduled actions suspended` };
    return { outcome: "applied", detail: changes.join("; ") };
  }

  async release(az: string, trace: CallTrace): Promise<ActionBody> {
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

  private groupsOf(az: string): StandbyGroup[] {
    if (this.o.standbyGroups.length === 0) throw new MissingIdentifierError("no standby Auto Scaling groups configured (LLMHA_STANDBY_ASGS is empty)");
    if (this.o.standbyAz !== undefined && az !== this.o.standbyAz) {
      throw new MissingIdentifierError(`no standby groups in ${az}: LLMHA_STANDBY_ASGS lists ${this.o.standbyAz}'s groups`);
    }
    return this.o.standbyGroups;
  }

  private async describe(trace: CallTrace, groups: StandbyGroup[]): Promise<Map<string, GroupState>> {
    const states = new Map<string, GroupState>();
    let NextToken: string | undefined;
    do {
      const page = await this.d.calls.call(trace, "DescribeAutoScalingGroups", () =>
        this.d.asg.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: groups.map((g) => g.name), ...(NextToken ? { NextToken } : {}) })),
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
