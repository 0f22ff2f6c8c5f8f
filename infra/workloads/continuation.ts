/**
 * The continuation relay's container in the L1 pod (`llm-ha continue`, docs/continuation.md):
 * HAProxy sends completions to it on the pod's loopback after the edge, and it sends them back
 * to HAProxy's loopback continuation listener over the same servers backend. Fenced like the
 * fallback: nothing listens beyond the pod's loopback (its metrics included, until a scrape
 * NetworkPolicy opens them), and it needs no credentials, no Redis and no Kubernetes API.
 */
import type * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { PORTS } from "../../contracts/names";
import type { HaproxyContinuation } from "../../contracts/haproxy-config";
import type { ContinuationKind } from "../../contracts/continuation";
import { loopbackProbeCommand } from "./fallback";

type Container = k8s.types.input.core.v1.Container;

/** What the generator renders for the relay in an L1 proxy's config. */
export function continuationProxyField(): HaproxyContinuation {
  return { relay: `127.0.0.1:${PORTS.l1Continue}`, bind: `127.0.0.1:${PORTS.l1ContinueUpstream}` };
}

/** The container beside HAProxy, from the agent image. */
export function continuationContainer(image: pulumi.Input<string>, kind: ContinuationKind = "vllm"): Container {
  const env = (name: string, value: string) => ({ name, value });
  return {
    name: "continue",
    image,
    args: ["continue"],
    env: [
      env("LLMHA_CONTINUE_HOST", "127.0.0.1"),
      env("LLMHA_CONTINUE_PORT", String(PORTS.l1Continue)),
      env("LLMHA_CONTINUE_UPSTREAM", `127.0.0.1:${PORTS.l1ContinueUpstream}`),
      env("LLMHA_CONTINUE_KIND", kind),
      env("LLMHA_CONTINUE_METRICS_ADDR", `127.0.0.1:${PORTS.l1ContinueMetrics}`),
    ],
    ports: [{ name: "continue", containerPort: PORTS.l1Continue }],
    // The kubelet probes from the node; the listener is the pod's loopback, so the probe runs inside.
    readinessProbe: { exec: { command: loopbackProbeCommand(PORTS.l1ContinueMetrics, "/healthz") }, periodSeconds: 5, failureThreshold: 2, timeoutSeconds: 3 },
    livenessProbe: { exec: { command: loopbackProbeCommand(PORTS.l1ContinueMetrics, "/healthz") }, periodSeconds: 10, failureThreshold: 3, timeoutSeconds: 3 },
    // Memory: the delivered text of each open stream (a few KiB) plus Node's own ~60 MiB.
    resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } },
    securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
  };
}
