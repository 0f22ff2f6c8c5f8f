/**
 * The capacity reservations and Capacity Blocks the GPU groups launch into, against what EC2
 * says of each (`ec2 describe-capacity-reservations`): one row per configured reservation.
 */
import type { CapacityReservation } from "@aws-sdk/client-ec2";
import { gpuGroupCreateSize } from "../../contracts/scarce-gpus";
import { standbySize, type StackConfig } from "../config";
import { RESERVATION_END_WARN_DAYS, type CheckRow } from "./checks";

/** A configured reservation: its class, AZ, type, whether the class runs on Capacity Blocks, and the group's sizes there. */
export interface WantedReservation {
  id: string;
  az: string;
  type: string;
  cls: string;
  block: boolean;
  /** The group's maximum in that AZ (the standby's ratio applied). */
  max: number;
  /** The group's running size in that AZ (the standby's ratio applied). */
  desired: number;
  /** Nodes the stack creates the group with (`gpuGroupCreateSize`): launched into the reservation at creation. */
  createSize: number;
}

/** Every reservation the stack's GPU classes name, with the sizes of the group that launches into it. */
export function wantedReservations(c: StackConfig): WantedReservation[] {
  return c.gpuClasses.flatMap((g) =>
    Object.entries(g.capacityReservations).map(([az, id]) => {
      const size = az === c.standbyAz ? standbySize(g, c.standbyCapacityRatio) : { desired: g.desiredPerAz, max: g.maxPerAz };
      const block = g.capacityType === "CAPACITY_BLOCK";
      return { id, az, type: g.instanceType, cls: g.name, block, max: size.max, desired: size.desired, createSize: gpuGroupCreateSize([g.instanceType], size.desired, true) };
    }),
  );
}

/** States of a reservation that will (or may) become usable: not yet `active`, so nothing launches into it now. */
const NOT_YET_ACTIVE = ["scheduled", "pending", "assessing", "delayed", "payment-pending"];

const utc = (d: Date) => `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;

/** What the stack does with the group at creation, for a reservation that cannot take it yet. */
function atCreation(w: WantedReservation): string {
  return w.createSize > 0
    ? `the stack creates the group in ${w.az} at ${w.createSize} inside it, and EKS ends a group that cannot launch its size at creation in CREATE_FAILED (only a replacement fixes that)`
    : `the stack creates the group in ${w.az} at 0, and the leader sizes it to ${w.desired} once the reservation is active (LLMHA_RESERVED_GROUPS; a standby AZ's group on its wake): no node runs there until then`;
}

/**
 * One configured reservation against what EC2 says of it. Invalid: not there, another AZ or
 * type, ended or refused, a plain reservation for a CAPACITY_BLOCK class. Blocking (`missing`):
 * not `active` yet (a scheduled Capacity Block before its start, a reservation still pending),
 * or fewer instances free in it than the group's running size there — unless the group runs
 * at 0, where a not-yet-active one is only warned. Warned, with the capacity semantics of
 * docs/infra.md: a group whose maximum is above the reservation's count (a targeted reservation
 * does not overflow to On-Demand: the launches past it fail), and a reservation that ends soon
 * (a Capacity Block runs at most 182 days and EC2 reclaims its instances at the end).
 */
export function reservationRow(w: WantedReservation, x: CapacityReservation | undefined, region: string, today: Date): CheckRow {
  const check = `reservation ${w.id}`;
  if (!x) return { check, status: "missing", detail: `not found in ${region}`, fix: `check gpuClasses[${w.cls}].capacityReservations.${w.az}` };
  const state = String(x.State);
  const problems: string[] = [];
  if (x.AvailabilityZone !== w.az) problems.push(`it is in ${x.AvailabilityZone}, configured for ${w.az}`);
  if (x.InstanceType !== w.type) problems.push(`it is for ${x.InstanceType}, the class launches ${w.type}`);
  if (state !== "active" && !NOT_YET_ACTIVE.includes(state)) problems.push(`its state is ${x.State}`);
  if (w.block && x.ReservationType !== "capacity-block") problems.push(`the class is CAPACITY_BLOCK but this is a ${x.ReservationType ?? "default"} reservation, not a Capacity Block`);
  if (problems.length) {
    return { check, status: "invalid", detail: problems.join("; "), fix: `set gpuClasses[${w.cls}].capacityReservations to {<its AZ>: ${w.id}} or use another reservation` };
  }
  const count = x.TotalInstanceCount;
  const ends = x.EndDate ? ` until ${utc(x.EndDate)}` : "";
  const detail = `${x.InstanceType} × ${count ?? "?"} in ${x.AvailabilityZone}, ${x.State}${ends}`;
  const lower = `set gpuClasses[${w.cls}].desiredPerAz: 0 (the group is then created at 0; scale it once the reservation can take it)`;

  if (state !== "active") {
    const starts = x.StartDate && x.StartDate.getTime() > today.getTime() ? `, starts ${utc(x.StartDate)}` : "";
    const what = `${x.InstanceType} × ${count ?? "?"} in ${x.AvailabilityZone}, ${state}${starts}: not active, no instance launches into it yet`;
    const wait = starts ? `wait until ${utc(x.StartDate!)}` : "wait until it is active";
    const watch = `aws ec2 describe-capacity-reservations --capacity-reservation-ids ${w.id} --region ${region} --query 'CapacityReservations[0].State'`;
    const elsewhere = w.block ? "" : `, or remove gpuClasses[${w.cls}].capacityReservations.${w.az} (the group then launches On-Demand)`;
    if (w.desired === 0) return { check, status: "warn", detail: `${what}; the group in ${w.az} runs at 0 until it is sized`, fix: `size it after ${starts ? utc(x.StartDate!) : "the reservation is active"} (${watch})` };
    return { check, status: "missing", detail: `${what}; ${atCreation(w)}`, fix: `${wait} (${watch}), or ${lower}${elsewhere}` };
  }

  const free = x.AvailableInstanceCount ?? count;
  if (free !== undefined && free < w.desired) {
    const held = count !== undefined ? count - free : undefined;
    const raise = w.block
      ? "buy a Capacity Block of that many instances and set it"
      : `aws ec2 modify-capacity-reservation --capacity-reservation-id ${w.id} --instance-count ${w.desired + (held ?? 0)} --region ${region}`;
    return {
      check,
      status: "missing",
      detail: `${detail}, ${free} free${held ? ` (${held} held by running instances)` : ""}; the group in ${w.az} needs ${w.desired}: ${atCreation(w)}`,
      fix: `${raise}, or lower gpuClasses[${w.cls}].desiredPerAz until the group in ${w.az} needs at most ${free}${held ? ", or stop the instances that hold it" : ""}`,
    };
  }

  const warnings: string[] = [];
  const fixes: string[] = [];
  if (count !== undefined && count < w.max) {
    warnings.push(`the group in ${w.az} may grow to ${w.max}, above its ${count}: a targeted reservation does not overflow to On-Demand, launches past ${count} fail (ReservationCapacityExceeded)`);
    fixes.push(`raise the reservation to ${w.max} instances or lower gpuClasses[${w.cls}].maxPerAz`);
  }
  const daysLeft = x.EndDate ? (x.EndDate.getTime() - today.getTime()) / 86_400_000 : undefined;
  if (daysLeft !== undefined && daysLeft < RESERVATION_END_WARN_DAYS) {
    warnings.push(`it ends in ${Math.max(0, Math.floor(daysLeft))} days: EC2 takes its instances back then`);
    fixes.push(`extend it before the end (its id stays), or ${w.block ? "buy the next Capacity Block" : "reserve again"} and set gpuClasses[${w.cls}].capacityReservations.${w.az} to it`);
  }
  return warnings.length ? { check, status: "warn", detail: `${detail}; ${warnings.join("; ")}`, fix: fixes.join("; ") } : { check, status: "ok", detail, fix: "" };
}
