/**
 * The public edge in the L1 pod: `llm-ha edge-sync` beside HAProxy copies the client keys
 * (Redis, by hash) into HAProxy's map through the admin socket, and answers oversized
 * requests with a complete 413 (its sink). An init container writes the map file first:
 * HAProxy refuses to start on a missing map (an empty one when Redis is not reachable yet:
 * every key refused until the sync fills it, never an open door).
 */
import type * as pulumi from "@pulumi/pulumi";
import type { HaproxyEdge } from "../../contracts/haproxy-edge";
import type { Container, Volume } from "./fallback";
import { redisCredential } from "./redis-secret";

const EDGE_REDIS_VOLUME = "edge-redis";

export interface L1EdgeSpec {
  /** The agent image (it carries `llm-ha edge-sync`). */
  image: pulumi.Input<string>;
  /** llm-ha cluster name (the keys' Redis namespace). */
  cluster: string;
  /** Secret with the Redis URL under `url`. */
  redisSecretName: string;
  /** Secret with the inference servers' own API key under `key` (vLLM `VLLM_API_KEY`): HAProxy sends it upstream. Default none. */
  upstreamKeySecretName?: string;
}

/** HAProxy's environment variable holding the servers' key (the generator's `upstreamKeyEnv`). */
export const UPSTREAM_KEY_ENV = "LLMHA_INFERENCE_API_KEY";

/** Where HAProxy and the sync share the map (an emptyDir). */
export const EDGE_MAP_DIR = "/var/run/llm-ha-edge";
export const EDGE_MAP = `${EDGE_MAP_DIR}/keys.map`;
/** The sink's loopback port in the pod. */
export const EDGE_SINK_PORT = 9412;
/** HAProxy's admin socket (the generator's `statsSocket` in the L1 config): HAProxy's container only. */
export const L1_ADMIN_SOCKET = "/var/run/haproxy/admin.sock";
/**
 * The socket edge-sync changes the key map through (the generator's `mapSocket`, `level user`):
 * on HAProxy 2.6 that level may add, set and delete map entries and is refused `show env`, where
 * the admin and operator levels show the environment and the servers' API key in it. A folder of
 * its own, so the sync container never sees the admin socket.
 */
export const L1_MAP_SOCKET_DIR = "/var/run/llm-ha-map";
export const L1_MAP_SOCKET = `${L1_MAP_SOCKET_DIR}/map.sock`;
/** HAProxy's user in the official image: the sync runs as it to use the map socket (mode 600). */
const HAPROXY_UID = 99;

/**
 * The generator's edge of the L1 proxies. Unauthenticated requests are also limited per
 * client address: the NLB's target groups preserve client IPs (`preserve_client_ip`).
 */
export function l1Edge(upstreamKey: boolean): HaproxyEdge {
  return { keysMap: EDGE_MAP, sinkAddress: `127.0.0.1:${EDGE_SINK_PORT}`, unauthPer10s: 300, ...(upstreamKey ? { upstreamKeyEnv: UPSTREAM_KEY_ENV } : {}) };
}

/** HAProxy's environment: the servers' key from its Secret (the configuration names the variable, never the key). */
export function haproxyEdgeEnv(s: Pick<L1EdgeSpec, "upstreamKeySecretName">): { name: string; valueFrom: { secretKeyRef: { name: string; key: string } } }[] {
  return s.upstreamKeySecretName ? [{ name: UPSTREAM_KEY_ENV, valueFrom: { secretKeyRef: { name: s.upstreamKeySecretName, key: "key" } } }] : [];
}

function syncContainer(s: L1EdgeSpec, name: string, args: string[]): Container {
  return {
    name,
    image: s.image,
    args: ["edge-sync", "--map", EDGE_MAP, ...args],
    env: [
      { name: "LLMHA_CLUSTER", value: s.cluster },
      // Its own Redis user (`llmha-edge` where roles are on): reads the client keys only.
      ...redisCredential(s.redisSecretName, EDGE_REDIS_VOLUME).env,
    ],
    resources: { requests: { cpu: "20m", memory: "64Mi" }, limits: { memory: "256Mi" } },
    securityContext: { runAsNonRoot: true, runAsUser: HAPROXY_UID, runAsGroup: HAPROXY_UID, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
    volumeMounts: [
      { name: "edge-map", mountPath: EDGE_MAP_DIR },
      { name: "map-socket", mountPath: L1_MAP_SOCKET_DIR },
      redisCredential(s.redisSecretName, EDGE_REDIS_VOLUME).mount,
    ],
  };
}

/** The init container that writes the map before HAProxy starts. */
export function edgeInitContainer(s: L1EdgeSpec): Container {
  return syncContainer(s, "edge-map", ["--once"]);
}

/** The sync + sink container. */
export function edgeSyncContainer(s: L1EdgeSpec): Container {
  return { ...syncContainer(s, "edge-sync", ["--socket", L1_MAP_SOCKET, "--sink", `127.0.0.1:${EDGE_SINK_PORT}`]), ports: [{ name: "edge-sink", containerPort: EDGE_SINK_PORT }] };
}

export function edgeVolumes(s: Pick<L1EdgeSpec, "redisSecretName">): Volume[] {
  return [{ name: "edge-map", emptyDir: {} }, { name: "map-socket", emptyDir: {} }, redisCredential(s.redisSecretName, EDGE_REDIS_VOLUME).volume];
}
