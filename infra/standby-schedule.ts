import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { ScheduleConfig } from "./config";
import type { CapacityGroup } from "./gpu-node-groups";
import { Problems } from "./problems";

export interface StandbyScheduleArgs {
  /** Every GPU node group; actions are created for the `standby` ones only. Required. */
  groups: CapacityGroup[];
  /** Cron expressions and their time zone. Required. */
  schedule: ScheduleConfig;
}

/**
 * Scale-to-zero of the standby AZ: scheduled actions on its node groups' auto scaling
 * groups (to 0 in the evening and at weekends, back to the configured size in the
 * morning). Active AZs are never touched; the controller can wake the standby AZ early.
 */
export class StandbySchedule extends pulumi.ComponentResource {
  readonly actions: aws.autoscaling.Schedule[];

  constructor(name: string, args: StandbyScheduleArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:StandbySchedule", name, {}, opts);
    this.actions = createStandbySchedule(name, args, this);
    this.registerOutputs({ actions: this.actions.map((a) => a.scheduledActionName) });
  }
}

export function createStandbySchedule(name: string, args: StandbyScheduleArgs, parent: pulumi.Resource): aws.autoscaling.Schedule[] {
  // Fallback groups stay at zero: only the agent wakes them, when the standby group cannot launch.
  const standby = args.groups.filter((g) => g.role === "standby" && !g.fallback);
  const p = new Problems();
  if (standby.length === 0) p.add("groups", "no node group has the standby role");
  p.throwIfAny("StandbySchedule arguments");
  const s = args.schedule;
  const actions: aws.autoscaling.Schedule[] = [];
  // A group on a Capacity Block is not parked: the block is paid for whether it runs or not,
  // and it ends (≤ 182 days, EC2 takes the instances back): a weekly scale-up outlives it
  // and would launch into a reservation that is gone (policy standby-schedule-rules).
  for (const g of standby.filter((x) => x.gpuClass.capacityType !== "CAPACITY_BLOCK")) {
    const id = `${name}-${g.az}-${g.gpuClass.name}`;
    const plan: [string, string | undefined, number][] = [
      ["down", s.scaleDown, 0],
      ["weekend-down", s.weekendDown, 0],
      ["up", s.scaleUp, g.desiredSize],
    ];
    for (const [what, recurrence, desired] of plan) {
      if (recurrence === undefined) continue;
      actions.push(
        new aws.autoscaling.Schedule(
          `${id}-${what}`,
          {
            autoscalingGroupName: g.asgName,
            scheduledActionName: `llm-ha-standby-${g.gpuClass.name}-${what}`,
            recurrence,
            timeZone: s.timeZone,
            minSize: 0,
            maxSize: g.maxSize,
            desiredCapacity: desired,
          },
          { parent },
        ),
      );
    }
  }
  return actions;
}
