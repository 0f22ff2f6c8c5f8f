/**
 * Names and ports both sides rely on: the agent listens on them, the infrastructure wires
 * Services, probes and HAProxy to them, the alerts and the dashboard select on them.
 */

/**
 * Ports the agent and the inference server listen on, on the node's own IP (hostNetwork),
 * and the L1 proxy's: `l1` inference, `l1Monitor` `/healthz` + `/metrics`, `l1AzHealth` its
 * own `/az/health` listener (what Route53 checks; a full inference frontend does not hold it up).
 */
export const PORTS = Object.freeze({ inference: 8000, agentHttp: 9400, agentCheck: 9401, l1: 8080, l1Monitor: 8404, l1AzHealth: 8081, l1Internal: 8082, l1Continue: 9420, l1ContinueMetrics: 9421, l1ContinueUpstream: 9422 });

/** Frontend name of the L1 proxy; HAProxy's exporter labels its backend `proxy="inference_servers"`. */
export const L1_PROXY_NAME = "inference";
/** The backend straight to the servers: its server rows are what the L1 alerts and dashboard read for the servers' states. */
export const L1_BACKEND = `${L1_PROXY_NAME}_servers`;
/** The backend over the same servers through the continuation relay (its SOCKS4 hop): completions, while the relay is up. */
export const L1_RELAYED_BACKEND = `${L1_PROXY_NAME}_relayed`;
/** The label matcher of both, whose responses, retries and queues the L1 alerts and dashboard sum. */
export const L1_BACKENDS_MATCHER = `proxy=~"${L1_BACKEND}|${L1_RELAYED_BACKEND}"`;

/**
 * Annotation (value `waived`) of an L1 NLB Service that serves clear text on purpose: a dev
 * stack's `llm-ha:edge.plainHttp`. The policy `l1-tls-required` lets only such a Service through.
 */
export const PLAIN_HTTP_WAIVER = "llm-ha.io/plain-http";

/**
 * Node identities: the audience of the projected ServiceAccount token the agents enrol with
 * (the leader refuses any other; the API server refuses this one), and the annotation (value
 * `off`) the stack puts on an agent DaemonSet when `llm-ha:nodeIdentities` is false. The policy
 * `agent-node-identity` lets an agent DaemonSet without the token through only with it.
 */
export const NODE_IDENTITY = Object.freeze({ audience: "llm-ha", optOutAnnotation: "llm-ha.io/node-identities", optOut: "off" });
