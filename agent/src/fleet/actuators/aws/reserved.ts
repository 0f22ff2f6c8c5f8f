/**
 * The GPU groups on a capacity reservation or Capacity Block that `pulumi up` created at zero:
 * EKS ends a node group whose creation launches more than its reservation holds in
 * CREATE_FAILED, and a reservation may be `scheduled`, `pending` or smaller than the group when
 * the stack is created. The leader sizes each one here, once its reservation is active, to
 * what the reservation holds free, up to the stack's size for it; a reservation that ended
 * (expired, cancelled, failed) brings its group back to zero, so the group stops launching
 * into nothing.
 *
 * State lives in AWS, not in this process: a group sized in full carries the ASG tag
 * `llm-ha:reserved-sized` naming its reservation, and is never raised again for that
 * reservation: a later scale-in (an operator's, a repair's) stands. A new reservation id
 * (a renewed block, set in the stack) sizes the group anew. Every call reads first and writes
 * only what differs, so the leader asks every minute and a repeat is `already`.
 */
import { CreateOrUpdateTagsCommand, DescribeAutoScalingGroupsCommand, UpdateAutoScalingGroupCommand, type AutoScalingClient } from "@aws-sdk/client-auto-scaling";
import type { CapacityReservation, EC2Client } from "@aws-sdk/client-ec2";
import type { ActionResult } from "../types";
import { CallTrace, type AwsCalls } from "./calls";
import type { ReservedGroup } from "./settings";

/** ASG tag: the reservation a group was sized for in full. */
export const RESERVED_SIZED_TAG = "llm-ha:reserved-sized";

/** Reservation states after which no instance launches into it again. */
const ENDED = new Set(["expired", "cancelled", "failed", "payment-failed", "unsupported"]);

export interface ReservedDeps {
  asg: AutoScalingClient;
  /** Built on first use: the EC2 client is loaded only by a leader with reserved groups. */
  ec2: () => Promise<EC2Client>;
  calls: AwsCalls;
}

/** What one group needs, from its group and its reservation. */
export interface ReservedPlan {
  /** The desired capacity to set, or null to leave it. */
  desired: number | null;
  /** Tag the group as sized for its reservation. */
  markSized: boolean;
  outcome: "applied" | "already";
  detail: string;
}

const day = (d: Date | undefined) => (d ? d.toISOString().slice(0, 16).replace("T", " ") + " UTC" : "no start date");

/** The decision for one group (pure: the tests and `llm-ha status` read it as it is). */
export function planReserved(g: ReservedGroup, group: { desired: number; max: number; sizedFor?: string }, r: CapacityReservation | undefined): ReservedPlan {
  const id = g.reservationId;
  if (!r) return { desired: null, markSized: false, outcome: "already", detail: `${id} not found in the region: ${g.name} stays at ${group.desired}` };
  const state = r.State ?? "unknown";
  if (ENDED.has(state)) {
    return group.desired > 0
      ? { desired: 0, markSized: false, outcome: "applied", detail: `${id} is ${state}: ${g.name} desired ${group.desired}→0 (no instance launches into it again)` }
      : { desired: null, markSized: false, outcome: "already", detail: `${id} is ${state}; ${g.name} at 0` };
  }
  if (group.sizedFor === id) return { desired: null, markSized: false, outcome: "already", detail: `${g.name} was sized for ${id}; its size (${group.desired}) is left as it is` };
  if (state !== "active") {
    return { desired: null, markSized: false, outcome: "already", detail: `${id} is ${state} (starts ${day(r.StartDate)}): ${g.name} waits at ${group.desired} of ${g.size}` };
  }
  const want = Math.min(g.size, group.max);
  if (group.desired >= want) return { desired: null, markSized: true, outcome: "applied", detail: `${g.name} already runs ${group.desired} of ${g.size} on ${id}: marked sized` };
  const free = Math.max(0, r.AvailableInstanceCount ?? 0);
  const target = Math.min(want, group.desired + free);
  if (target <= group.desired) return { desired: null, markSized: false, outcome: "already", detail: `${id} is active but holds no free instance: ${g.name} waits at ${group.desired} of ${g.size}` };
  return {
    desired: target,
    markSized: target >= want,
    outcome: "applied",
    detail: `${id} active, ${free} free: ${g.name} desired ${group.desired}→${target}${target < want ? ` (of ${g.size}; the rest when the reservation frees them)` : ""}`,
  };
}

export class ReservedActions {
  constructor(
    private readonly groups: readonly ReservedGroup[],
    private readonly d: ReservedDeps,
  ) {}

  /** One result per group: `applied` where a size or a tag changed, `already` where nothing did, `failed` for all on a failed read. */
  async size(): Promise<ActionResult[]> {
    if (this.groups.length === 0) return [];
    const started = performance.now();
    const trace = new CallTrace();
    const names = this.groups.map((g) => g.name);
    let found: Map<string, { desired: number; min: number; max: number; sizedFor?: string }>;
    let reservations: Map<string, CapacityReservation>;
    try {
      const out = await this.d.calls.call(trace, "DescribeAutoScalingGroups", () => this.d.asg.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: names })));
      found = new Map(
        (out.AutoScalingGroups ?? []).map((a) => [
          a.AutoScalingGroupName ?? "",
          { desired: a.DesiredCapacity ?? 0, min: a.MinSize ?? 0, max: a.MaxSize ?? 0, sizedFor: a.Tags?.find((t) => t.Key === RESERVED_SIZED_TAG)?.Value },
        ]),
      );
      reservations = await this.describeReservations(trace);
    } catch (err) {
      const detail = (err as Error).message;
      return this.groups.map((g) => ({ action: "capacity.size", az: "", group: g.name, outcome: "failed", calls: trace.count, detail: `${g.name}: ${detail}`, durationMs: performance.now() - started }));
    }
    const results: ActionResult[] = [];
    for (const g of this.groups) {
      const t0 = performance.now();
      const before = trace.count;
      const group = found.get(g.name);
      const r = reservations.get(g.reservationId);
      const az = r?.AvailabilityZone ?? "";
      if (!group) {
        results.push({ action: "capacity.size", az, group: g.name, outcome: "failed", calls: 0, detail: `no Auto Scaling group ${g.name} (LLMHA_RESERVED_GROUPS)`, durationMs: 0 });
        continue;
      }
      const plan = planReserved(g, group, r);
      try {
        if (plan.desired !== null) {
          // Min and max are sent as they are: the role's grant names the group and bounds both (infra/agent-iam.ts).
          const input = { AutoScalingGroupName: g.name, MinSize: Math.min(group.min, plan.desired), MaxSize: group.max, DesiredCapacity: plan.desired };
          await this.d.calls.call(trace, "UpdateAutoScalingGroup", () => this.d.asg.send(new UpdateAutoScalingGroupCommand(input)));
        }
        if (plan.markSized) {
          const tag = { ResourceId: g.name, ResourceType: "auto-scaling-group", Key: RESERVED_SIZED_TAG, Value: g.reservationId, PropagateAtLaunch: false };
          await this.d.calls.call(trace, "CreateOrUpdateTags", () => this.d.asg.send(new CreateOrUpdateTagsCommand({ Tags: [tag] })));
        }
        results.push({ action: "capacity.size", az, group: g.name, outcome: plan.outcome, calls: trace.count - before, detail: plan.detail, durationMs: performance.now() - t0 });
      } catch (err) {
        results.push({ action: "capacity.size", az, group: g.name, outcome: "failed", calls: trace.count - before, detail: `${g.name}: ${(err as Error).message}`, durationMs: performance.now() - t0 });
      }
    }
    return results;
  }

  /** The groups' reservations, by id. An id EC2 does not know fails the whole call: then each is asked alone, and an unknown one is left out (its group waits). */
  private async describeReservations(trace: CallTrace): Promise<Map<string, CapacityReservation>> {
    const { DescribeCapacityReservationsCommand } = await import("@aws-sdk/client-ec2");
    const ec2 = await this.d.ec2();
    const out = new Map<string, CapacityReservation>();
    const ask = async (ids: string[]): Promise<void> => {
      const res = await this.d.calls.call(trace, "DescribeCapacityReservations", () => ec2.send(new DescribeCapacityReservationsCommand({ CapacityReservationIds: ids })));
      for (const r of res.CapacityReservations ?? []) if (r.CapacityReservationId) out.set(r.CapacityReservationId, r);
    };
    const notFound = (err: unknown) => /InvalidCapacityReservationId/.test((err as Error).message);
    const ids = [...new Set(this.groups.map((g) => g.reservationId))];
    try {
      await ask(ids);
    } catch (err) {
      if (!notFound(err)) throw err;
      for (const id of ids) await ask([id]).catch((e: unknown) => { if (!notFound(e)) throw e; });
    }
    return out;
  }
}
