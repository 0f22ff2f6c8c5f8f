/**
 * Ports and names of the L4 fallback in the L1 pods that the workloads and the observability
 * part share. A leaf (no Pulumi imports), so `npm run observability` stays light.
 */

/** Where the fallback's OpenAI-compatible API listens inside the L1 pod (loopback only). */
export const FALLBACK_PORT = 9410;
/**
 * The fallback's metrics listener (`LLMHA_FALLBACK_METRICS_ADDR`): `GET /metrics` and
 * `/healthz` only, on the pod's address, for Prometheus; the API stays on 127.0.0.1:9410.
 */
export const FALLBACK_METRICS_PORT = 9411;
/** Container port name of the metrics listener (≤ 15 characters), what the scrape selects. */
export const FALLBACK_METRICS_PORT_NAME = "fb-metrics";
/** `job` label of the fallback's scrape. */
export const FALLBACK_SCRAPE_JOB = "llm-ha-fallback";
/** Namespace Prometheus runs in (kube-prometheus-stack's usual one): the only one let in to the metrics port. */
export const DEFAULT_PROMETHEUS_NAMESPACE = "monitoring";
