/**
 * ARC zonal shift for the configured load balancers: start (or extend) a shift away from an
 * AZ, and cancel it. Only shifts whose comment starts with `llm-ha ` are extended or
 * cancelled, so an operator's shift or a practice run is left alone; the comment carries the
 * fencing token and the reason, so a later leader can tell whose shift it sees.
 */
// To use the official client once the registry carries it, change this line (and the
// ARCZonalShiftClient import in ../aws.ts) to `from "@aws-sdk/client-arc-zonal-shift"`.
import {
  CancelZonalShiftCommand,
  GetManagedResourceCommand,
  ListZonalShiftsCommand,
  StartZonalShiftCommand,
  UpdateZonalShiftCommand,
  type ARCZonalShiftClient,
  type ZonalShiftSummary,
} from "../arc-zonal-shift";
import type { ActionContext, ForeignAction, ShiftContext } from "../types";
import { MissingIdentifierError, type ActionBody, type AwsCalls, type CallTrace } from "./calls";

/** Shift comments start with this; only such shifts are extended or cancelled. */
export const SHIFT_COMMENT_PREFIX = "llm-ha ";
/** ARC's longest expiry: 72 h. */
export const MAX_SHIFT_EXPIRY_MS = 72 * 3_600_000;

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

/** The last part of a load balancer ARN, for details: `net/l1-a/0123…`. */
const shortArn = (arn: string) => arn.replace(/^.*:loadbalancer\//, "");

/** The part of `AwsActuatorOptions` the shift actions read (the actuator passes its options as they are). */
export interface ZonalShiftSettings {
  shiftResources: string[];
  azIds: Record<string, string>;
}

export interface ZonalShiftDeps {
  arc: ARCZonalShiftClient;
  calls: AwsCalls;
  now: () => number;
}

export class ZonalShiftActions {
  /** Load balancer ARN → AZ ids it is deployed in (placement does not change; read once). */
  private readonly placement = new Map<string, Set<string>>();

  constructor(
    private readonly o: ZonalShiftSettings,
    private readonly d: ZonalShiftDeps,
  ) {}

  async start(az: string, ctx: ShiftContext, trace: CallTrace): Promise<ActionBody> {
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
        const left = ours.expiryTime.getTime() - this.d.now();
        if (left >= ctx.expiresInMs / 2) {
          held.push(`${shortArn(r)} shift ${ours.zonalShiftId} has ${Math.round(left / 60_000)}m left`);
          continue;
        }
        await this.d.calls.call(trace, "UpdateZonalShift", () => this.d.arc.send(new UpdateZonalShiftCommand({ zonalShiftId: ours.zonalShiftId, expiresIn: expires, comment })));
        changes.push(`${shortArn(r)} shift ${ours.zonalShiftId} extended to ${expires}`);
        continue;
      }
      const theirs = active.find((s) => s.awayFrom === azId);
      if (theirs) {
        // An operator's (or a practice run's) shift already moves this AZ's traffic; leave it to them.
        held.push(`${shortArn(r)} already shifted away from ${azId} by ${theirs.zonalShiftId} (${JSON.stringify(theirs.comment)})`);
        continue;
      }
      const out = await this.d.calls.call(trace, "StartZonalShift", () =>
        this.d.arc.send(new StartZonalShiftCommand({ resourceIdentifier: r, awayFrom: azId, expiresIn: expires, comment })),
      );
      changes.push(`${shortArn(r)} shifted away from ${azId} for ${expires} (${out.zonalShiftId})`);
    }
    if (changes.length === 0) return { outcome: "already", detail: held.join("; ") };
    return { outcome: "applied", detail: [...changes, ...held].join("; ") };
  }

  async cancel(az: string, trace: CallTrace): Promise<ActionBody> {
    const azId = this.azIdOf(az);
    if (this.o.shiftResources.length === 0) throw new MissingIdentifierError("no load balancers to shift (LLMHA_SHIFT_RESOURCES is empty)");
    const changes: string[] = [];
    // Every configured resource, no placement lookup: a cancel must work even when
    // GetManagedResource does not.
    for (const r of this.o.shiftResources) {
      const ours = (await this.activeShifts(trace, r)).filter((s) => s.awayFrom === azId && s.comment.startsWith(SHIFT_COMMENT_PREFIX));
      for (const s of ours) {
        await this.d.calls.call(trace, "CancelZonalShift", () => this.d.arc.send(new CancelZonalShiftCommand({ zonalShiftId: s.zonalShiftId })));
        changes.push(`${shortArn(r)} shift ${s.zonalShiftId} cancelled`);
      }
    }
    if (changes.length === 0) return { outcome: "already", detail: `no active llm-ha shift away from ${azId}` };
    return { outcome: "applied", detail: changes.join("; ") };
  }

  /** Active shifts on the configured load balancers without llm-ha's comment: someone else's. */
  async foreign(trace: CallTrace): Promise<ForeignAction[]> {
    const names = new Map(Object.entries(this.o.azIds).map(([name, id]) => [id, name]));
    const out: ForeignAction[] = [];
    for (const r of this.o.shiftResources) {
      for (const s of await this.activeShifts(trace, r)) {
        if (s.comment.startsWith(SHIFT_COMMENT_PREFIX)) continue;
        out.push({
          kind: "shift",
          id: s.zonalShiftId,
          az: names.get(s.awayFrom) ?? null,
          detail: `${shortArn(r)} shifted away from ${s.awayFrom} by ${s.zonalShiftId} until ${s.expiryTime.toISOString()} (${JSON.stringify(s.comment.slice(0, 128))})`,
        });
      }
    }
    return out;
  }

  private azIdOf(az: string): string {
    const id = this.o.azIds[az];
    if (id === undefined) throw new MissingIdentifierError(`no AZ id for ${az} (LLMHA_AZ_IDS has ${Object.keys(this.o.azIds).join(", ") || "none"})`);
    return id;
  }

  /** The configured load balancers deployed in `azId` (ARC's `appliedWeights` keys). */
  private async resourcesIn(trace: CallTrace, azId: string): Promise<string[]> {
    if (this.o.shiftResources.length === 0) throw new MissingIdentifierError("no load balancers to shift (LLMHA_SHIFT_RESOURCES is empty)");
    for (const r of this.o.shiftResources) {
      if (this.placement.has(r)) continue;
      const res = await this.d.calls.call(trace, "GetManagedResource", () => this.d.arc.send(new GetManagedResourceCommand({ resourceIdentifier: r })));
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
      const page = await this.d.calls.call(trace, "ListZonalShifts", () =>
        this.d.arc.send(new ListZonalShiftsCommand({ resourceIdentifier, status: "ACTIVE", ...(nextToken ? { nextToken } : {}) })),
      );
      out.push(...(page.items ?? []));
      nextToken = page.nextToken;
    } while (nextToken);
    return out;
  }
}
