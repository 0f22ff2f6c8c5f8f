// Entry point the Pulumi CLI runs for `pulumi preview --policy-pack policies`. The
// constructor starts the analyzer's gRPC server, so nothing else may import this file:
// tests and the offline runner import ./all instead.
import { PolicyPack } from "@pulumi/policy";
import { PACK_NAME, policies } from "./all";

new PolicyPack(PACK_NAME, { policies, enforcementLevel: "mandatory" });
