/**
 * The continuation relay's container in the L1 pod (`llm-ha continue`, docs/continuation.md):
 * HAProxy picks a completion's server after the edge and connects to it through the relay (its
 * SOCKS4 hop, on loopback TCP); the relay sends a cut answer's second request to HAProxy's
 * continuation listener, on a Unix socket in a volume the two containers share. Fenced like the
 * fallback: only its metrics-only listener (`GET /metrics`, `/healthz`) is on the pod's address,
 * where the NetworkPolicy `llmha-continue-metrics` lets the Prometheus namespace alone in; it
 * needs no credentials, no Redis and no Kubernetes API.
 */
import type * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { PORTS } from "../../contracts/names";
import type { HaproxyContinuation } from "../../contracts/haproxy-config";
import type { ContinuationKind } from "../../contracts/continuation";
import { loopbackProbeCommand } from "./fallback";
import { CONTINUE_METRICS_PORT_NAME } from "./continuation-names";

type Container = k8s.types.input.core.v1.Container;

/**
 * Where HAProxy and the relay meet. One relay process is HAProxy's SOCKS4 hop to the servers on
 * loopback TCP (`socks4` takes no Unix socket), where the other containers of the pod could
 * reach it too, as they already reach the servers themselves from the same network namespace.
 * The continuation listener (second requests only), and the listeners of several workers, are
 * Unix sockets in a volume only the two containers mount: cheaper per crossing than loopback TCP.
 */
export const CONTINUE_SOCKET_DIR = "/var/run/llm-ha-continue";
export const CONTINUE_SOCKET_VOLUME = "continue-sockets";
const RELAY_SOCKET = `${CONTINUE_SOCKET_DIR}/relay.sock`;
const UPSTREAM_SOCKET = `${CONTINUE_SOCKET_DIR}/upstream.sock`;

/** Where one relay process listens: HAProxy's SOCKS4 hop. */
const RELAY_ADDRESS = `127.0.0.1:${PORTS.l1Continue}`;

/** What the generator renders for the relay in an L1 proxy's config: one relay on loopback TCP, or `workers` relay processes, a socket each. */
export function continuationProxyField(workers = 1): HaproxyContinuation {
  return { relay: workers > 1 ? `unix@${RELAY_SOCKET}` : RELAY_ADDRESS, bind: `unix@${UPSTREAM_SOCKET}`, workers };
}

/** The volume the sockets live in, and its mount in HAProxy's container and the relay's. */
export function continuationVolume(): { volume: k8s.types.input.core.v1.Volume; mount: k8s.types.input.core.v1.VolumeMount } {
  return { volume: { name: CONTINUE_SOCKET_VOLUME, emptyDir: { medium: "Memory", sizeLimit: "1Mi" } }, mount: { name: CONTINUE_SOCKET_VOLUME, mountPath: CONTINUE_SOCKET_DIR } };
}

/**
 * The relay container's memory: Node's own ~60 MiB per process (the workers, and their primary
 * when there are several) plus the open streams' delivered text (about 50 KiB each, measured:
 * docs/bench.md), requested for a thousand; the limit leaves as much again.
 */
export function continuationMemory(workers: number): { requestMi: number; limitMi: number } {
  const processes = workers > 1 ? workers + 1 : 1;
  const requestMi = 64 * processes + 64;
  return { requestMi, limitMi: Math.max(512, 2 * requestMi) };
}

/**
 * The container beside HAProxy, from the agent image. `listenerMaxconn`: the continuation
 * listener's maxconn in the rendered config, which the relay's pool toward it is sized to.
 * `workers`: relay processes (`LLMHA_CONTINUE_WORKERS`, `llm-ha:haproxy.relayWorkers`).
 */
export function continuationContainer(image: pulumi.Input<string>, kind: ContinuationKind = "vllm", listenerMaxconn?: number, workers = 1): Container {
  const memory = continuationMemory(workers);
  const env = (name: string, value: string) => ({ name, value });
  return {
    name: "continue",
    image,
    args: ["continue"],
    env: [
      ...(workers > 1 ? [env("LLMHA_CONTINUE_SOCKET", RELAY_SOCKET)] : [env("LLMHA_CONTINUE_HOST", "127.0.0.1"), env("LLMHA_CONTINUE_PORT", String(PORTS.l1Continue))]),
      env("LLMHA_CONTINUE_UPSTREAM", `unix@${UPSTREAM_SOCKET}`),
      env("LLMHA_CONTINUE_KIND", kind),
      // As many connections to the listener as it takes, all kept for reuse (each closed after 20 s idle).
      ...(listenerMaxconn !== undefined ? [env("LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS", String(listenerMaxconn))] : []),
      // One relay process uses one core at most; above 1 each listens on its own socket beside
      // RELAY_SOCKET (relay-0.sock, …), which HAProxy's config lists (continuationProxyField).
      env("LLMHA_CONTINUE_WORKERS", String(workers)),
      // Prometheus scrapes this one (the NetworkPolicy lets only its namespace in); completions stay on loopback.
      env("LLMHA_CONTINUE_METRICS_ADDR", `0.0.0.0:${PORTS.l1ContinueMetrics}`),
    ],
    ports: [{ name: CONTINUE_METRICS_PORT_NAME, containerPort: PORTS.l1ContinueMetrics }],
    volumeMounts: [continuationVolume().mount],
    // Still exec probes on 127.0.0.1 (which 0.0.0.0 includes): an httpGet would come from the
    // node, i.e. the cluster security group, and need 9421 opened to it (every node and pod)
    // in infra/fences.ts and the NetworkPolicy; this way only Prometheus reaches the port.
    readinessProbe: { exec: { command: loopbackProbeCommand(PORTS.l1ContinueMetrics, "/healthz") }, periodSeconds: 5, failureThreshold: 2, timeoutSeconds: 3 },
    livenessProbe: { exec: { command: loopbackProbeCommand(PORTS.l1ContinueMetrics, "/healthz") }, periodSeconds: 10, failureThreshold: 3, timeoutSeconds: 3 },
    resources: { requests: { cpu: "100m", memory: `${memory.requestMi}Mi` }, limits: { memory: `${memory.limitMi}Mi` } },
    securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
  };
}
