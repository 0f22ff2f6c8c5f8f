import * as crypto from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import {
  DEFAULT_HAPROXY_GLOBALS,
  DEFAULT_HAPROXY_TUNING,
  haproxyBufferBytes,
  hardStopAfterMs,
  HaproxyDnsGroup,
  proxyFrontendMaxconn,
  renderHaproxyConfig,
  type HaproxyTuning,
} from "../../contracts/haproxy-config";
import { appLabels, ConfigMap, Deployment, objectName, onePodAtATime, PodDisruptionBudget, Service } from "./common";
import { L1_PROXY_NAME, PLAIN_HTTP_WAIVER, PORTS } from "../../contracts/names";
import { APP, LABELS, NET_ROLE_LABEL } from "../names";
import { fallbackContainer, fallbackProxyField, fallbackVolumes, FALLBACK_SERVICE_ACCOUNT, type FallbackSidecarSpec } from "./fallback";
import { continuationContainer, continuationProxyField, continuationVolume } from "./continuation";
import { edgeInitContainer, edgeSyncContainer, edgeVolumes, haproxyEdgeEnv, l1Edge, L1_ADMIN_SOCKET, L1_MAP_SOCKET, L1_MAP_SOCKET_DIR, type L1EdgeSpec } from "./l1-edge";

export interface L1ProxySpec {
  /** Namespace of the L1 objects (the edge namespace, PSA `restricted`). */
  namespace: string;
  /** Namespace of the inference servers' headless Services (the workloads namespace): HAProxy's DNS names point there. */
  serversNamespace: string;
  /** The AZ this proxy serves; its nodes are the servers, the other AZs' the `backup`s. */
  az: string;
  /** Every AZ, in stack order. */
  azs: string[];
  /** Server slots per AZ: at least the AZ's maximum GPU node count. */
  slots: Record<string, number>;
  image: pulumi.Input<string>;
  replicas: number;
  /**
   * The NLB's TLS listeners (ACM certificate, ELB security policy): clients and Route53's
   * checkers reach HAProxy only through them. Null: clear text, a dev stack's explicit
   * waiver (`llm-ha:edge.plainHttp`), marked on the Service for the policy `l1-tls-required`.
   */
  tls: { certificateArn: string; sslPolicy: string } | null;
  /**
   * The NLB's own security group (infra/fences.ts `nlbFrontend`): the API to clients, the
   * `/az/health` listener to Route53's checkers only. Default none: the load balancer
   * controller makes one open to the world on every listener.
   */
  frontendSecurityGroupId?: pulumi.Input<string>;
  /** Public subnet of this AZ: the NLB lives only there. */
  publicSubnetId: pulumi.Input<string>;
  /** Name of the NLB (≤ 32 characters), stable so dashboards and outputs can name it. */
  nlbName: string;
  /** The L4 fallback beside HAProxy (infra/workloads/fallback.ts). Default none. */
  fallback?: FallbackSidecarSpec;
  /** The public edge's key sync beside HAProxy (infra/workloads/l1-edge.ts): clients authenticate. */
  edge: L1EdgeSpec;
  /** HAProxy's CPU (`llm-ha:haproxy.cpu`, `llm-ha:haproxy.nbthread`). Default `L1_CPU`: 2 cores, 2 threads. */
  cpu?: L1Cpu;
}

/**
 * HAProxy's CPU in an L1 pod: the container's limit, and its threads (`nbthread`), by default the
 * limit rounded up. Unset, HAProxy starts a thread per CPU it may run on, which in a container is
 * every CPU of the node, whatever the pod was given: more threads than CPU time, and the edge bench
 * saw idle threads spin on the stick table's lock.
 */
export interface L1Cpu {
  /** The HAProxy container's CPU limit in millicores. */
  limitMillis: number;
  /** Threads; default `l1Nbthread(limitMillis)`. */
  nbthread?: number;
  /**
   * The continuation relay's processes beside it (`LLMHA_CONTINUE_WORKERS`, `llm-ha:haproxy.relayWorkers`),
   * default 1. One relay process relays on one core at most (roughly 11,000–13,000 tokens/s on the
   * bench's machine, docs/bench.md); a pod that carries more sets more. Not derived from the CPU limit:
   * on the 2-core bench two workers added latency rather than removed it (docs/bench.md).
   */
  relayWorkers?: number;
}

export const L1_CPU: Readonly<L1Cpu> = Object.freeze({ limitMillis: 2000 });

/** The continuation relay's processes in an L1 pod: `relayWorkers`, default 1. */
export function l1RelayWorkers(cpu: L1Cpu = L1_CPU): number {
  return cpu.relayWorkers ?? 1;
}

/** Threads for a CPU limit: one per core it may use, rounded up, at least 1. */
export function l1Nbthread(cpu: L1Cpu = L1_CPU): number {
  return cpu.nbthread ?? Math.max(1, Math.ceil(cpu.limitMillis / 1000));
}


/**
 * The L1 proxies run the generator's defaults (the production configuration the drill
 * measures): 2048 connections, 128 KiB buffers, 600 s timeouts, 32 requests per GPU node.
 */
const L1_TUNING: Partial<HaproxyTuning> = {};
const L1_GLOBALS = DEFAULT_HAPROXY_GLOBALS;

/** preStop sleep: the pod keeps serving while the NLB deregisters it (its deregistration is slow). */
export const L1_PRESTOP_S = 20;
/** Slack between HAProxy's own `hard-stop-after` and the kubelet's SIGKILL. */
const L1_KILL_MARGIN_S = 5;
/** HAProxy's own memory besides its buffers: the process, pools, resolvers, stats (idle RSS ~15 MiB on 2.6). */
const L1_BASE_MEMORY_MIB = 64;
const MIB = 1024 * 1024;

/**
 * Shutdown timeline of an L1 pod: preStop (20 s, still serving), then the stop signal (the
 * official image's STOPSIGNAL is SIGUSR1: a soft stop, no new connections, requests in
 * flight go on), HAProxy exits at the latest `hard-stop-after` later (the longest timeout
 * + 10 s = 610 s), and the kubelet's SIGKILL comes after the grace period, 5 s after that:
 * 20 + 610 + 5 = 635 s. A generation that started just before the stop is not cut.
 */
export function l1StopBudget(): { preStopS: number; hardStopAfterS: number; terminationGracePeriodSeconds: number } {
  const hardStopAfterS = Math.ceil(hardStopAfterMs([L1_TUNING]) / 1000);
  return { preStopS: L1_PRESTOP_S, hardStopAfterS, terminationGracePeriodSeconds: L1_PRESTOP_S + hardStopAfterS + L1_KILL_MARGIN_S };
}

/**
 * Memory of an L1 pod from the buffers (`haproxyBufferBytes`: ~2 buffers of `tune.bufsize`
 * per request in flight; measured on 2.6 ~145 KB per waiting 100–120 KB request, the
 * request buffer kept for a retry, the response's comes on top while it streams).
 * Limit: every connection of the global `maxconn` in flight, 64 + 2048 × 2 × 128 KiB =
 * 576 MiB. Request: the requests the GPU nodes it can reach take at once (every AZ's slots
 * × `serverMaxconn`, at most `maxconn`), e.g. 36 slots × 32 = 1152 → 64 + 288 = 352 MiB.
 */
export function l1Memory(slots: Record<string, number>): { requestMi: number; limitMi: number } {
  const inService = Object.values(slots).reduce((a, n) => a + n, 0) * (L1_TUNING.serverMaxconn ?? DEFAULT_HAPROXY_TUNING.serverMaxconn);
  const mi = (streams: number) => L1_BASE_MEMORY_MIB + Math.ceil(haproxyBufferBytes(streams, L1_GLOBALS.bufsize) / MIB);
  return { requestMi: mi(Math.min(inService, L1_GLOBALS.maxconn)), limitMi: mi(L1_GLOBALS.maxconn) };
}

/** The continuation listener's maxconn in the L1 config: the relay's pool toward it is sized to it. */
export const L1_CONTINUATION_MAXCONN = proxyFrontendMaxconn({ health: "agent", tuning: L1_TUNING, continuation: continuationProxyField() }, L1_GLOBALS);

/** The NLB Service's port names: the TLS listeners are chosen by name (`…-ssl-ports`). */
export const L1_PORT_NAMES = Object.freeze({ api: "https", azHealth: "az-health" });

/** A headless Service's group of servers in HAProxy's `server-template`; `namespace`: the Service's (the workloads namespace). */
export function dnsGroup(namespace: string, az: string, slots: number): HaproxyDnsGroup {
  return {
    prefix: objectName(az, "n"),
    fqdn: `${objectName("inference", az)}.${namespace}.svc.cluster.local`,
    slots,
    port: PORTS.inference,
    agentPort: PORTS.agentCheck,
    httpPort: PORTS.agentHttp,
  };
}

/** HAProxy's stats page in the L1 pods: loopback only (`kubectl port-forward <pod> 8405`). */
export const L1_STATS_BIND = "127.0.0.1:8405";

/** `haproxy.cfg` of one AZ's L1 proxy, from the same generator the drill runs. */
export function l1HaproxyConfig(s: Pick<L1ProxySpec, "serversNamespace" | "az" | "azs" | "slots" | "fallback" | "cpu"> & { edge?: Pick<L1EdgeSpec, "upstreamKeySecretName"> }): string {
  return renderHaproxyConfig({
    nbthread: l1Nbthread(s.cpu),
    monitorBind: `:${PORTS.l1Monitor}`,
    // The monitor port is open to the NLB and Prometheus; the stats page only to `kubectl port-forward`.
    statsBind: L1_STATS_BIND,
    prometheusExporter: true,
    statsSocket: L1_ADMIN_SOCKET,
    mapSocket: L1_MAP_SOCKET,
    maxconn: L1_GLOBALS.maxconn,
    bufsize: L1_GLOBALS.bufsize,
    hardStopAfterMs: l1StopBudget().hardStopAfterS * 1000,
    proxies: [
      {
        name: L1_PROXY_NAME,
        bind: `:${PORTS.l1}`,
        health: "agent",
        forwardAzHealth: true,
        // Route53 checks this listener; `/az/health` on :8080 keeps working for anyone using it.
        azHealthBind: `:${PORTS.l1AzHealth}`,
        tuning: L1_TUNING,
        edge: l1Edge(!!s.edge?.upstreamKeySecretName),
        servers: {
          kind: "dns",
          // The servers live in the workloads namespace, the proxy in the edge one.
          local: dnsGroup(s.serversNamespace, s.az, s.slots[s.az]),
          backup: s.azs.filter((a) => a !== s.az).map((a) => dnsGroup(s.serversNamespace, a, s.slots[a])),
        },
        // The fallback replays through a loopback frontend without the edge (it holds no client key).
        ...(s.fallback ? { fallback: fallbackProxyField(), internalBind: `127.0.0.1:${PORTS.l1Internal}` } : {}),
        // Completions go through `llm-ha continue` (the container beside HAProxy), a socket per relay process.
        continuation: continuationProxyField(l1RelayWorkers(s.cpu)),
      },
    ],
  });
}

/** ConfigMap, Deployment, PDB and NLB Service of one AZ's L1 proxy. */
export function l1ProxyManifests(s: L1ProxySpec): { configMap: ConfigMap; deployment: Deployment; pdb: PodDisruptionBudget; service: Service } {
  const name = objectName("l1", s.az);
  const labels = appLabels(APP.l1, s.az);
  const cfg = l1HaproxyConfig(s);
  const configMap: ConfigMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: s.namespace, labels }, data: { "haproxy.cfg": cfg } };
  const monitor = { httpGet: { path: "/healthz", port: PORTS.l1Monitor } };
  const stop = l1StopBudget();
  const memory = l1Memory(s.slots);
  const deployment: Deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: s.namespace, labels },
    spec: {
      replicas: s.replicas,
      selector: { matchLabels: labels },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        // A new configuration rolls the pods.
        // The net-role label gives the pods the L1 security group (infra/fences.ts).
        metadata: { labels: { ...labels, [NET_ROLE_LABEL]: "l1" }, annotations: { "llm-ha.io/config-sha256": crypto.createHash("sha256").update(cfg).digest("hex") } },
        spec: {
          nodeSelector: { [LABELS.zone]: s.az, "llm-ha.io/node-role": "system" },
          affinity: {
            podAntiAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [
                { weight: 100, podAffinityTerm: { topologyKey: "kubernetes.io/hostname", labelSelector: { matchLabels: labels } } },
              ],
            },
          },
          topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "kubernetes.io/hostname", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: labels } }],
          terminationGracePeriodSeconds: stop.terminationGracePeriodSeconds,
          securityContext: { runAsNonRoot: true, runAsUser: 99, runAsGroup: 99, seccompProfile: { type: "RuntimeDefault" }, ...(s.fallback ? { fsGroup: 10001 } : {}) },
          // Neither HAProxy, the key sync nor the fallback calls the Kubernetes API (IRSA's token is projected apart).
          automountServiceAccountToken: false,
          initContainers: [edgeInitContainer(s.edge)],
          ...(s.fallback ? { serviceAccountName: FALLBACK_SERVICE_ACCOUNT } : {}),
          containers: [
            {
              name: "haproxy",
              image: s.image,
              args: ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"],
              env: haproxyEdgeEnv(s.edge),
              ports: [
                { name: "http", containerPort: PORTS.l1 },
                { name: "monitor", containerPort: PORTS.l1Monitor },
                { name: "az-health", containerPort: PORTS.l1AzHealth },
              ],
              readinessProbe: { ...monitor, periodSeconds: 2, failureThreshold: 2 },
              livenessProbe: { ...monitor, periodSeconds: 10, failureThreshold: 3 },
              // Keep serving while the NLB deregisters the pod (its deregistration is slow).
              lifecycle: { preStop: { exec: { command: ["sleep", String(stop.preStopS)] } } },
              // The CPU limit is what `nbthread` is rendered from (l1Nbthread).
              resources: { requests: { cpu: "250m", memory: `${memory.requestMi}Mi` }, limits: { cpu: `${(s.cpu ?? L1_CPU).limitMillis}m`, memory: `${memory.limitMi}Mi` } },
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
              volumeMounts: [
                { name: "config", mountPath: "/usr/local/etc/haproxy", readOnly: true },
                { name: "run", mountPath: "/var/run/haproxy" },
                { name: "map-socket", mountPath: L1_MAP_SOCKET_DIR },
                { name: "edge-map", mountPath: "/var/run/llm-ha-edge", readOnly: true },
                continuationVolume().mount,
              ],
            },
            edgeSyncContainer(s.edge),
            ...(s.fallback ? [fallbackContainer(s.fallback, PORTS.l1Internal)] : []),
            continuationContainer(s.edge.image, "vllm", L1_CONTINUATION_MAXCONN, l1RelayWorkers(s.cpu)),
          ],
          volumes: [
            { name: "config", configMap: { name } },
            { name: "run", emptyDir: {} },
            continuationVolume().volume,
            ...edgeVolumes(s.edge),
            ...(s.fallback ? fallbackVolumes(s.fallback) : []),
          ],
        },
      },
    },
  };
  const lb = "service.beta.kubernetes.io/aws-load-balancer";
  // The NLB terminates TLS with the ACM certificate on both listeners and forwards plain TCP to
  // HAProxy inside the VPC; nothing faces the internet in clear text unless a dev stack waived it.
  const tlsAnnotations: Record<string, string> = s.tls
    ? { [`${lb}-ssl-cert`]: s.tls.certificateArn, [`${lb}-ssl-ports`]: `${L1_PORT_NAMES.api},${L1_PORT_NAMES.azHealth}`, [`${lb}-ssl-negotiation-policy`]: s.tls.sslPolicy }
    : { [PLAIN_HTTP_WAIVER]: "waived" };
  // One AZ per NLB: ARC zonal shift does not apply to it (a lost AZ leaves DNS by its health check).
  const attributes = ["load_balancing.cross_zone.enabled=false"];
  const service: Service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name,
      namespace: s.namespace,
      labels,
      // Provisioned by the AWS Load Balancer Controller: an NLB in this AZ only, targets
      // the HAProxy pod IPs. Its own health check (≥ 10 s) only backs HAProxy up; L1
      // switching happens inside HAProxy, L3 in Route53 through this NLB.
      annotations: {
        [`${lb}-type`]: "external",
        [`${lb}-name`]: s.nlbName,
        [`${lb}-scheme`]: "internet-facing",
        [`${lb}-nlb-target-type`]: "ip",
        [`${lb}-subnets`]: s.publicSubnetId,
        [`${lb}-attributes`]: attributes.join(","),
        [`${lb}-target-group-attributes`]: "deregistration_delay.timeout_seconds=15,preserve_client_ip.enabled=true",
        [`${lb}-healthcheck-protocol`]: "http",
        [`${lb}-healthcheck-port`]: String(PORTS.l1Monitor),
        [`${lb}-healthcheck-path`]: "/healthz",
        [`${lb}-healthcheck-interval`]: "10",
        [`${lb}-healthcheck-healthy-threshold`]: "2",
        [`${lb}-healthcheck-unhealthy-threshold`]: "2",
        ...tlsAnnotations,
        // Our frontend group instead of the controller's (which opens every listener to
        // 0.0.0.0/0); the controller still adds the rules into the L1 pods' group.
        ...(s.frontendSecurityGroupId
          ? { [`${lb}-security-groups`]: s.frontendSecurityGroupId, [`${lb}-manage-backend-security-group-rules`]: "true" }
          : {}),
      },
    },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "service.k8s.aws/nlb",
      selector: labels,
      ports: [
        s.tls ? { name: L1_PORT_NAMES.api, port: 443, targetPort: PORTS.l1, protocol: "TCP" } : { name: "http", port: 80, targetPort: PORTS.l1, protocol: "TCP" },
        // Route53's health checks (infra/dns.ts), on HAProxy's own `/az/health` listener (TLS too where the API is).
        { name: L1_PORT_NAMES.azHealth, port: PORTS.l1AzHealth, targetPort: PORTS.l1AzHealth, protocol: "TCP" },
      ],
    },
  };
  return { configMap, deployment, pdb: onePodAtATime(name, s.namespace, labels), service };
}
