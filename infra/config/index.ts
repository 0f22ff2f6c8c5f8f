/**
 * The stack's settings (`Pulumi.<stack>.yaml`), one file per concern as the rest of infra/
 * is split: network, cluster, GPU classes, standby, workloads, DNS, data stores, the L4
 * fallback and observability. `resolveConfig` reads them all and reports every problem at once.
 */
export type { ApiEndpointConfig } from "./cluster";
export type { CapacityConfig, ExistingClusterConfig } from "./existing-cluster";
export type { FallbackConfig, FallbackProviderConfig } from "./fallback";
export type { GamedayConfig } from "./gameday";
export { GPU_CLASSES, type GpuClassConfig, type GpuClassName } from "./gpu";
export type { ObservabilityConfig } from "./observability";
export { isCron } from "./read";
export { REPAIR_MODES, repairSpareSetting, type RepairConfig, type RepairMode } from "./repair";
export { loadConfig, resolveConfig } from "./resolve";
export { DEFAULT_PRACTICE_BUDGET_MINUTES, DEFAULT_PRACTICE_CRON, standbySize, type PracticeWakeConfig, type ScheduleConfig } from "./standby";
export type { ConfigSources, StackConfig, WeightsLoad } from "./stack-config";
export { GATED_MODEL_ORGS, HF_REVISION, revisionCommand, S3_WEIGHTS_STACKS } from "./workloads";
export { systemGroupSize } from "./cluster";
