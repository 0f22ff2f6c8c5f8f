/** Reason codes: what the agent says about a node, machine-readable; alerts and dashboards select on them. */
/** Every reason code the agent can emit: a small fixed set, so it can be a label. */
export const REASON_CODES = [
  "AGENT_STARTING",
  "RECOVERING",
  "AGENT_DRAINING",
  "GPU_DRIVER_NOT_LOADED",
  "GPU_LOST",
  "GPU_DRIVER_MISMATCH",
  "GPU_QUERY_FAILED",
  "GPU_QUERY_TIMEOUT",
  "GPU_QUERY_GARBAGE",
  "GPU_MISSING",
  "GPU_ECC_UNCORRECTED",
  "GPU_ROW_REMAP_FAILURE",
  "GPU_RECOVERY_ACTION",
  "GPU_ROW_REMAP_PENDING",
  "GPU_RETIRED_PAGES_PENDING",
  "GPU_SLOWDOWN",
  "GPU_XID_FATAL",
  "MODEL_MISSING",
  "MODEL_LOADING",
  "INFERENCE_DOWN",
  "INFERENCE_NOT_READY",
  "INFERENCE_ERROR",
  "INFERENCE_TIMEOUT",
  "INFERENCE_BAD_ANSWER",
  "PROBE_SLOW",
  "PROBE_TIMEOUT",
  "PROBE_FAILED",
  "ENGINE_WEDGED",
] as const;

export type ReasonCode = (typeof REASON_CODES)[number];
