/**
 * The L1 proxy's manifests line up with the HAProxy configuration they carry (the prod stack
 * under Pulumi mocks): the pod outlives the longest generation when it is stopped, its memory
 * covers the buffers of every connection HAProxy accepts, and Route53 checks the zone on
 * HAProxy's own `/az/health` listener, through the NLB and the NetworkPolicy.
 */
import { Deployment as K8sDeployment } from "kubernetes-models/apps/v1";
import { beforeAll, describe, expect, it } from "vitest";
import { captureStack, ofType, type CapturedResource } from "../../infra/capture";
import { PORTS } from "../../contracts/names";

interface Container {
  name: string;
  ports: { name: string; containerPort: number }[];
  lifecycle: { preStop: { exec: { command: string[] } } };
  resources: { requests: { memory: string }; limits: { memory: string } };
}
interface L1Deployment {
  metadata: { name: string };
  spec: { template: { spec: { terminationGracePeriodSeconds: number; containers: Container[] } } };
}
interface K8sObject {
  kind: string;
  metadata: { name: string };
  data?: Record<string, string>;
  spec?: Record<string, unknown>;
}

let rs: CapturedResource[];
const k8s = (kind: string): K8sObject[] => rs.filter((r) => r.type.startsWith("kubernetes:") && (r.props as unknown as K8sObject).kind === kind).map((r) => r.props as unknown as K8sObject);
const l1Deployments = (): L1Deployment[] => k8s("Deployment").filter((d) => d.metadata.name.startsWith("l1-")) as unknown as L1Deployment[];

/** A `global`/section setting of the configuration, in ms or plain. */
function setting(cfg: string, re: RegExp): number {
  const m = re.exec(cfg);
  if (!m) throw new Error(`no ${re.source} in the configuration`);
  return Number(m[1]);
}
const mib = (q: string): number => {
  const m = /^(\d+)Mi$/.exec(q);
  if (!m) throw new Error(`memory ${q} is not in Mi`);
  return Number(m[1]);
};

beforeAll(async () => {
  rs = await captureStack("prod");
});

describe("L1 proxy manifests (prod stack)", () => {
  it("lets the longest generation finish when a pod stops: grace ≥ preStop + hard-stop-after > timeout server", () => {
    const deps = l1Deployments();
    expect(deps.length).toBeGreaterThan(0);
    for (const d of deps) {
      expect(() => new K8sDeployment(d as unknown as ConstructorParameters<typeof K8sDeployment>[0]).validate()).not.toThrow();
      const cfg = k8s("ConfigMap").find((c) => c.metadata.name === d.metadata.name)?.data?.["haproxy.cfg"] ?? "";
      const pod = d.spec.template.spec;
      const c = pod.containers[0];
      const [cmd, secs] = c.lifecycle.preStop.exec.command;
      expect(cmd).toBe("sleep");
      const preStopS = Number(secs);
      const timeoutServerS = setting(cfg, /backend inference_servers[\s\S]*?timeout server (\d+)ms/) / 1000;
      const timeoutClientS = setting(cfg, /frontend inference\n[\s\S]*?timeout client (\d+)ms/) / 1000;
      const hardStopS = setting(cfg, /^ {2}hard-stop-after (\d+)ms$/m) / 1000;
      expect(timeoutServerS).toBe(600);
      // HAProxy lets a request that began just before the stop signal run its whole timeout...
      expect(hardStopS).toBeGreaterThanOrEqual(Math.max(timeoutServerS, timeoutClientS));
      // ...and exits on its own just before the kubelet's SIGKILL.
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStopS + hardStopS);
      expect(pod.terminationGracePeriodSeconds).toBeLessThanOrEqual(preStopS + hardStopS + 30);
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStopS + timeoutServerS);
    }
  });

  it("sizes the pod's memory from maxconn and tune.bufsize (~2 buffers per connection)", () => {
    for (const d of l1Deployments()) {
      const cfg = k8s("ConfigMap").find((c) => c.metadata.name === d.metadata.name)?.data?.["haproxy.cfg"] ?? "";
      const maxconn = setting(cfg, /^global\n {2}maxconn (\d+)$/m);
      const bufsize = setting(cfg, /^ {2}tune\.bufsize (\d+)$/m);
      expect(bufsize).toBeGreaterThanOrEqual(131_072);
      const { requests, limits } = d.spec.template.spec.containers[0].resources;
      const buffersMi = (maxconn * 2 * bufsize) / 2 ** 20;
      expect(mib(limits.memory)).toBeGreaterThanOrEqual(buffersMi);
      expect(mib(limits.memory)).toBeLessThanOrEqual(buffersMi + 256);
      expect(mib(requests.memory)).toBeLessThanOrEqual(mib(limits.memory));
      // The inference frontend leaves room under the global maxconn for the health listeners.
      expect(setting(cfg, /frontend inference\n {2}bind \S+\n {2}maxconn (\d+)$/m)).toBeLessThan(maxconn);
    }
  });

  it("checks each zone on HAProxy's own /az/health listener: pod port, NLB listener, NetworkPolicy, Route53", () => {
    const port = PORTS.l1AzHealth;
    for (const d of l1Deployments()) {
      const cfg = k8s("ConfigMap").find((c) => c.metadata.name === d.metadata.name)?.data?.["haproxy.cfg"] ?? "";
      expect(cfg).toContain(`frontend inference_az_health\n  bind :${port}\n`);
      expect(d.spec.template.spec.containers[0].ports).toContainEqual({ name: "az-health", containerPort: port });
      const svc = k8s("Service").find((s) => s.metadata.name === d.metadata.name);
      expect(svc?.spec?.ports).toContainEqual({ name: "az-health", port, targetPort: port, protocol: "TCP" });
    }
    const policy = k8s("NetworkPolicy").find((n) => n.metadata.name === "l1-proxy-ingress");
    // Route53's checkers come from the internet: the rule without `from` must open the port.
    const open = (policy?.spec?.ingress as { from?: unknown[]; ports: { port: number; protocol: string }[] }[]).filter((r) => r.from === undefined);
    expect(open.flatMap((r) => r.ports)).toContainEqual({ port, protocol: "TCP" });
    const checks = ofType(rs, "aws:route53/healthCheck:HealthCheck").map((r) => r.props);
    expect(checks.length).toBeGreaterThan(0);
    for (const c of checks) expect(c).toMatchObject({ port, resourcePath: "/az/health" });
  });
});
