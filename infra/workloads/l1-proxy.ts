import * as crypto from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import { HaproxyDnsGroup, renderHaproxyConfig } from "../../contracts/haproxy-config";
import { appLabels, ConfigMap, Deployment, objectName, onePodAtATime, PodDisruptionBudget, Service } from "./common";
import { L1_PROXY_NAME, PORTS } from "../../contracts/names";
import { APP, LABELS } from "../names";

export interface L1ProxySpec {
  namespace: string;
  /** The AZ this proxy serves; its nodes are the servers, the other AZs' the `backup`s. */
  az: string;
  /** Every AZ, in stack order. */
  azs: string[];
  /** Server slots per AZ: at least the AZ's maximum GPU node count. */
  slots: Record<string, number>;
  image: string;
  replicas: number;
  /** Public subnet of this AZ: the NLB lives only there. */
  publicSubnetId: pulumi.Input<string>;
  /** Name of the NLB (≤ 32 characters), stable so dashboards and outputs can name it. */
  nlbName: string;
  /** Turn on ARC zonal shift for the NLB. */
  zonalShift: boolean;
}


/** A headless Service's group of servers in HAProxy's `server-template`. */
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

/** `haproxy.cfg` of one AZ's L1 proxy, from the same generator the drill runs. */
export function l1HaproxyConfig(s: Pick<L1ProxySpec, "namespace" | "az" | "azs" | "slots">): string {
  return renderHaproxyConfig({
    monitorBind: `:${PORTS.l1Monitor}`,
    prometheusExporter: true,
    statsSocket: "/var/run/haproxy/admin.sock",
    proxies: [
      {
        name: L1_PROXY_NAME,
        bind: `:${PORTS.l1}`,
        health: "agent",
        forwardAzHealth: true,
        servers: {
          kind: "dns",
          local: dnsGroup(s.namespace, s.az, s.slots[s.az]),
          backup: s.azs.filter((a) => a !== s.az).map((a) => dnsGroup(s.namespace, a, s.slots[a])),
        },
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
        metadata: { labels, annotations: { "llm-ha.io/config-sha256": crypto.createHash("sha256").update(cfg).digest("hex") } },
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
          terminationGracePeriodSeconds: 45,
          securityContext: { runAsNonRoot: true, runAsUser: 99, runAsGroup: 99, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "haproxy",
              image: s.image,
              args: ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"],
              ports: [
                { name: "http", containerPort: PORTS.l1 },
                { name: "monitor", containerPort: PORTS.l1Monitor },
              ],
              readinessProbe: { ...monitor, periodSeconds: 2, failureThreshold: 2 },
              livenessProbe: { ...monitor, periodSeconds: 10, failureThreshold: 3 },
              // Keep serving while the NLB deregisters the pod (its deregistration is slow).
              lifecycle: { preStop: { exec: { command: ["sleep", "20"] } } },
              resources: { requests: { cpu: "250m", memory: "128Mi" }, limits: { memory: "512Mi" } },
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
              volumeMounts: [
                { name: "config", mountPath: "/usr/local/etc/haproxy", readOnly: true },
                { name: "run", mountPath: "/var/run/haproxy" },
              ],
            },
          ],
          volumes: [
            { name: "config", configMap: { name } },
            { name: "run", emptyDir: {} },
          ],
        },
      },
    },
  };
  const lb = "service.beta.kubernetes.io/aws-load-balancer";
  const attributes = ["load_balancing.cross_zone.enabled=false", ...(s.zonalShift ? ["zonal_shift.config.enabled=true"] : [])];
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
      },
    },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "service.k8s.aws/nlb",
      selector: labels,
      ports: [{ name: "http", port: 80, targetPort: PORTS.l1, protocol: "TCP" }],
    },
  };
  return { configMap, deployment, pdb: onePodAtATime(name, s.namespace, labels), service };
}
