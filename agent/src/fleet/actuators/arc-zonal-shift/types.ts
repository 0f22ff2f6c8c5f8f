/**
 * The ARC zonal shift API's shapes (`arc-zonal-shift` 2022-10-30) under the names
 * `@aws-sdk/client-arc-zonal-shift` gives them: the shift records, each command's input and
 * output, and the unions the client and commands are typed over. Types only.
 */
import type { MetadataBearer } from "@smithy/types";

export type ZonalShiftStatus = "ACTIVE" | "EXPIRED" | "CANCELED";

/** A zonal shift as Start/Update/Cancel return it. */
export interface ZonalShift {
  zonalShiftId: string;
  resourceIdentifier: string;
  /** AZ ID (`use1-az1`), not the account-specific AZ name. */
  awayFrom: string;
  expiryTime: Date;
  startTime: Date;
  status: ZonalShiftStatus;
  comment: string;
}

export interface ZonalShiftSummary extends ZonalShift {
  shiftType?: string;
  practiceRunOutcome?: string;
}

export interface ZonalShiftInResource {
  zonalShiftId: string;
  resourceIdentifier: string;
  awayFrom: string;
  expiryTime: Date;
  startTime: Date;
  comment: string;
  appliedStatus: string;
  shiftType?: string;
  practiceRunOutcome?: string;
}

export interface StartZonalShiftCommandInput {
  /** ARN of the load balancer. */
  resourceIdentifier: string;
  /** AZ ID to move traffic away from, e.g. `use1-az1`. */
  awayFrom: string;
  /** `<n>m` or `<n>h`, at most 72 h. */
  expiresIn: string;
  /** At most 128 characters; only the latest comment is kept. */
  comment: string;
}
export type StartZonalShiftCommandOutput = ZonalShift & MetadataBearer;

export interface UpdateZonalShiftCommandInput {
  zonalShiftId: string;
  expiresIn?: string;
  comment?: string;
}
export type UpdateZonalShiftCommandOutput = ZonalShift & MetadataBearer;

export interface CancelZonalShiftCommandInput {
  zonalShiftId: string;
}
export type CancelZonalShiftCommandOutput = ZonalShift & MetadataBearer;

export interface ListZonalShiftsCommandInput {
  resourceIdentifier?: string;
  status?: ZonalShiftStatus;
  nextToken?: string;
  maxResults?: number;
}
export interface ListZonalShiftsCommandOutput extends MetadataBearer {
  items?: ZonalShiftSummary[];
  nextToken?: string;
}

export interface GetManagedResourceCommandInput {
  resourceIdentifier: string;
}
export interface GetManagedResourceCommandOutput extends MetadataBearer {
  arn?: string;
  name?: string;
  /** AZ ID → 1 (serving) or 0 (shifted away): the AZs the resource is deployed in. */
  appliedWeights: Record<string, number>;
  zonalShifts: ZonalShiftInResource[];
}

export type ServiceInputTypes =
  | StartZonalShiftCommandInput
  | UpdateZonalShiftCommandInput
  | CancelZonalShiftCommandInput
  | ListZonalShiftsCommandInput
  | GetManagedResourceCommandInput;
export type ServiceOutputTypes =
  | StartZonalShiftCommandOutput
  | UpdateZonalShiftCommandOutput
  | CancelZonalShiftCommandOutput
  | ListZonalShiftsCommandOutput
  | GetManagedResourceCommandOutput;
