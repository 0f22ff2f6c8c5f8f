/**
 * The five ARC zonal shift commands llm-ha sends (start, update, cancel, list, get managed
 * resource): each builds its REST request and reads its JSON answer into the official
 * client's output shape. They share Smithy's `Command` base, so aws-sdk-client-mock can
 * stub them by class as it does the official ones.
 */
import { Command } from "@smithy/core/client";
import type { Handler, MiddlewareStack, ResponseMetadata } from "@smithy/types";
import { invoke, rfc3986, text, type ARCZonalShiftClientResolvedConfig, type Json, type RestRequest } from "./transport";
import type {
  CancelZonalShiftCommandInput,
  CancelZonalShiftCommandOutput,
  GetManagedResourceCommandInput,
  GetManagedResourceCommandOutput,
  ListZonalShiftsCommandInput,
  ListZonalShiftsCommandOutput,
  ServiceInputTypes,
  ServiceOutputTypes,
  StartZonalShiftCommandInput,
  StartZonalShiftCommandOutput,
  UpdateZonalShiftCommandInput,
  UpdateZonalShiftCommandOutput,
  ZonalShift,
  ZonalShiftStatus,
} from "./types";

/** REST-JSON timestamps are epoch seconds; anything else is read as date text. */
const date = (v: unknown): Date => new Date(typeof v === "number" ? v * 1000 : String(v));

function zonalShift(j: Json): ZonalShift {
  return {
    zonalShiftId: text(j.zonalShiftId),
    resourceIdentifier: text(j.resourceIdentifier),
    awayFrom: text(j.awayFrom),
    expiryTime: date(j.expiryTime),
    startTime: date(j.startTime),
    status: text(j.status) as ZonalShiftStatus,
    comment: text(j.comment),
  };
}

function optional(j: Json): { shiftType?: string; practiceRunOutcome?: string } {
  return {
    ...(typeof j.shiftType === "string" ? { shiftType: j.shiftType } : {}),
    ...(typeof j.practiceRunOutcome === "string" ? { practiceRunOutcome: j.practiceRunOutcome } : {}),
  };
}

const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter((x): x is Json => typeof x === "object" && x !== null) : []);

/** One operation: how to build its request and read its answer. */
abstract class ArcCommand<I extends ServiceInputTypes, O extends ServiceOutputTypes> extends Command<I, O, ARCZonalShiftClientResolvedConfig, ServiceInputTypes, ServiceOutputTypes> {
  constructor(readonly input: I) {
    super();
  }

  protected abstract request(): RestRequest;
  protected abstract output(body: Json, $metadata: ResponseMetadata): O;

  resolveMiddleware(_stack: MiddlewareStack<ServiceInputTypes, ServiceOutputTypes>, config: ARCZonalShiftClientResolvedConfig): Handler<I, O> {
    return async () => {
      const { body, $metadata, response } = await invoke(config, this.request());
      return { output: this.output(body, $metadata), response };
    };
  }
}

export class StartZonalShiftCommand extends ArcCommand<StartZonalShiftCommandInput, StartZonalShiftCommandOutput> {
  protected request(): RestRequest {
    const { resourceIdentifier, awayFrom, expiresIn, comment } = this.input;
    return { method: "POST", path: "/zonalshifts", body: { resourceIdentifier, awayFrom, expiresIn, comment } };
  }
  protected output(body: Json, $metadata: ResponseMetadata): StartZonalShiftCommandOutput {
    return { ...zonalShift(body), $metadata };
  }
}

export class UpdateZonalShiftCommand extends ArcCommand<UpdateZonalShiftCommandInput, UpdateZonalShiftCommandOutput> {
  protected request(): RestRequest {
    const { zonalShiftId, expiresIn, comment } = this.input;
    return { method: "PATCH", path: `/zonalshifts/${rfc3986(zonalShiftId)}`, body: { ...(expiresIn ? { expiresIn } : {}), ...(comment !== undefined ? { comment } : {}) } };
  }
  protected output(body: Json, $metadata: ResponseMetadata): UpdateZonalShiftCommandOutput {
    return { ...zonalShift(body), $metadata };
  }
}

export class CancelZonalShiftCommand extends ArcCommand<CancelZonalShiftCommandInput, CancelZonalShiftCommandOutput> {
  protected request(): RestRequest {
    return { method: "DELETE", path: `/zonalshifts/${rfc3986(this.input.zonalShiftId)}` };
  }
  protected output(body: Json, $metadata: ResponseMetadata): CancelZonalShiftCommandOutput {
    return { ...zonalShift(body), $metadata };
  }
}

export class ListZonalShiftsCommand extends ArcCommand<ListZonalShiftsCommandInput, ListZonalShiftsCommandOutput> {
  protected request(): RestRequest {
    const { resourceIdentifier, status, nextToken, maxResults } = this.input;
    return { method: "GET", path: "/zonalshifts", query: { resourceIdentifier, status, nextToken, maxResults: maxResults === undefined ? undefined : String(maxResults) } };
  }
  protected output(body: Json, $metadata: ResponseMetadata): ListZonalShiftsCommandOutput {
    return {
      items: list(body.items).map((j) => ({ ...zonalShift(j), ...optional(j) })),
      ...(typeof body.nextToken === "string" ? { nextToken: body.nextToken } : {}),
      $metadata,
    };
  }
}

export class GetManagedResourceCommand extends ArcCommand<GetManagedResourceCommandInput, GetManagedResourceCommandOutput> {
  protected request(): RestRequest {
    return { method: "GET", path: `/managedresources/${rfc3986(this.input.resourceIdentifier)}` };
  }
  protected output(body: Json, $metadata: ResponseMetadata): GetManagedResourceCommandOutput {
    const weights: Record<string, number> = {};
    const raw = typeof body.appliedWeights === "object" && body.appliedWeights !== null ? (body.appliedWeights as Json) : {};
    for (const [az, w] of Object.entries(raw)) if (typeof w === "number") weights[az] = w;
    return {
      ...(typeof body.arn === "string" ? { arn: body.arn } : {}),
      ...(typeof body.name === "string" ? { name: body.name } : {}),
      appliedWeights: weights,
      zonalShifts: list(body.zonalShifts).map((j) => ({
        zonalShiftId: text(j.zonalShiftId),
        resourceIdentifier: text(j.resourceIdentifier),
        awayFrom: text(j.awayFrom),
        expiryTime: date(j.expiryTime),
        startTime: date(j.startTime),
        comment: text(j.comment),
        appliedStatus: text(j.appliedStatus),
        ...optional(j),
      })),
      $metadata,
    };
  }
}
