/**
 * A thin client for the ARC zonal shift API (REST-JSON, `arc-zonal-shift` 2022-10-30), with
 * the class, command, input and output names of `@aws-sdk/client-arc-zonal-shift`, which
 * this machine's npm registry does not carry. It builds on the same Smithy `Client` and
 * `Command` base classes as the official clients, so `mockClient(ARCZonalShiftClient)` from
 * aws-sdk-client-mock stubs it the same way, and moving to the official package is one
 * import line in aws.ts and one in aws/zonal-shift.ts (and in the tests):
 *
 *   import { ARCZonalShiftClient, … } from "@aws-sdk/client-arc-zonal-shift";
 *
 * This file holds the client class and is the one import path for every name; the parts:
 * arc-zonal-shift/types.ts (inputs, outputs, shift records), arc-zonal-shift/transport.ts
 * (SigV4 signing with the default credential chain, node:http(s) with a timeout, REST-JSON
 * errors as `ARCZonalShiftServiceException` named as AWS names them), and
 * arc-zonal-shift/commands.ts (the five operations llm-ha uses). It sends each command
 * once: llm-ha retries in retry.ts, where every attempt is counted.
 */
import { Client } from "@smithy/core/client";
import { resolveConfig, type ARCZonalShiftClientConfig, type ARCZonalShiftClientResolvedConfig } from "./arc-zonal-shift/transport";
import type { ServiceInputTypes, ServiceOutputTypes } from "./arc-zonal-shift/types";

export type {
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
  ZonalShiftInResource,
  ZonalShiftStatus,
  ZonalShiftSummary,
} from "./arc-zonal-shift/types";
export {
  ARCZonalShiftServiceException,
  ArcClientConfigError,
  NodeRequestHandler,
  type ARCZonalShiftClientConfig,
  type ARCZonalShiftClientResolvedConfig,
  type RawHttpResponse,
} from "./arc-zonal-shift/transport";
export {
  CancelZonalShiftCommand,
  GetManagedResourceCommand,
  ListZonalShiftsCommand,
  StartZonalShiftCommand,
  UpdateZonalShiftCommand,
} from "./arc-zonal-shift/commands";

export class ARCZonalShiftClient extends Client<object, ServiceInputTypes, ServiceOutputTypes, ARCZonalShiftClientResolvedConfig> {
  constructor(config: ARCZonalShiftClientConfig = {}) {
    super(resolveConfig(config));
  }

  override destroy(): void {
    this.config.requestHandler.destroy?.();
  }
}
