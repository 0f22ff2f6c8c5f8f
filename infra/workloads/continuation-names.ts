/**
 * Names of the continuation relay's metrics listener in the L1 pods that the workloads and the
 * observability part share. A leaf (no Pulumi imports), like fallback-names.ts, so
 * `npm run observability` stays light. The port itself is `PORTS.l1ContinueMetrics` (9421).
 */

/** Container port name of the relay's metrics listener (≤ 15 characters), what the scrape selects. */
export const CONTINUE_METRICS_PORT_NAME = "ct-metrics";
/** `job` label of the relay's scrape. */
export const CONTINUE_SCRAPE_JOB = "llm-ha-continue";
