import { describe, expect, it } from "vitest";
import { controllerManifests } from "../../infra/workloads/controller";
import { l1ProxyManifests } from "../../infra/workloads/l1-proxy";
import { podStandardViolations, podsMeetNamespaceLevel } from "../../policies/pod-standards";
import type { CapturedResource } from "../../policies/runner";
import { at, find, happyStack, messages } from "./fixtures";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- pod specs are untyped JSON

const IMAGE = `agent@sha256:${"ab".repeat(32)}`;

function res(type: string, name: string, props: unknown): CapturedResource {
  return { type, name, urn: `urn:pulumi:test::llm-ha::${type}::${name}`, props: structuredClone(props) as Record<string, unknown> };
}
const namespace = (name: string, enforce: string) => res("kubernetes:core/v1:Namespace", `ns-${name}`, { apiVersion: "v1", kind: "Namespace", metadata: { name, labels: { "pod-security.kubernetes.io/enforce": enforce } } });

/** The L1 pod (HAProxy, key sync init container and sidecar, fallback, continuation relay) and the controller as infra renders them. */
function edgeWorkloads(ns = "llm-ha-edge"): CapturedResource[] {
  const l1 = l1ProxyManifests({
    namespace: ns, serversNamespace: "llm-ha", az: "us-east-1a", azs: ["us-east-1a", "us-east-1b"], slots: { "us-east-1a": 2, "us-east-1b": 2 },
    image: `haproxy@sha256:${"cd".repeat(32)}`, replicas: 2, publicSubnetId: "subnet-1", nlbName: "l1-a", tls: null,
    edge: { image: IMAGE, cluster: "prod", redisSecretName: "llm-ha-redis-edge", upstreamKeySecretName: "llm-ha-inference-key" },
    fallback: { image: IMAGE, namespace: ns, cluster: "prod", region: "us-east-1", kafkaBootstrap: "b-1:9098", redisSecretName: "llm-ha-redis-fallback", models: ["m"] },
  });
  const ctl = controllerManifests({ namespace: ns, image: IMAGE, clusterName: "prod", redisSecretName: "llm-ha-redis-controller", replicas: 3 });
  return [res("kubernetes:apps/v1:Deployment", "l1", l1.deployment), res("kubernetes:apps/v1:Deployment", "controller", ctl.deployment)];
}

const stack = (edgeLevel = "restricted") => [...happyStack(), namespace("llm-ha", "privileged"), namespace("llm-ha-edge", edgeLevel), ...edgeWorkloads()];
const podOf = (r: CapturedResource): O => at(r.props, "spec.template.spec") as O;
const container = (r: CapturedResource, name: string): O => [...(podOf(r).initContainers ?? []), ...podOf(r).containers].find((c: O) => c.name === name);

describe("pods-meet-namespace-level", () => {
  it("passes the L1 pod (every sidecar and the init container) and the controller in a restricted namespace, the host's pods in a privileged one", async () => {
    const rs = stack();
    expect(podOf(find(rs, "l1")).containers.map((c: O) => c.name)).toEqual(["haproxy", "edge-sync", "fallback", "continue"]);
    expect(await messages(podsMeetNamespaceLevel, rs)).toEqual([]);
  });

  it("refuses a pod in a restricted namespace that would need the host or more than restricted allows, naming each container", async () => {
    const rs = stack();
    const l1 = find(rs, "l1");
    podOf(l1).hostNetwork = true;
    delete container(l1, "edge-map").securityContext.allowPrivilegeEscalation;
    container(l1, "fallback").securityContext.capabilities = { drop: ["NET_RAW"], add: ["SYS_PTRACE"] };
    container(l1, "continue").ports = [{ containerPort: 80, hostPort: 80 }];
    podOf(l1).volumes.push({ name: "cache", hostPath: { path: "/mnt/cache" } }, { name: "nfs", nfs: { server: "nfs", path: "/" } });
    expect(await messages(podsMeetNamespaceLevel, rs)).toEqual([
      "Deployment l1-us-east-1a in namespace llm-ha-edge (enforce restricted) would be refused by Pod Security Admission: hostNetwork is set; volume cache is a hostPath; " +
        "container fallback adds SYS_PTRACE; container continue binds host port 80; volume nfs is of type nfs; container edge-map does not set allowPrivilegeEscalation: false; " +
        "container fallback does not drop ALL capabilities.",
    ]);
  });

  it("refuses root, a missing seccomp profile and a container that sets runAsNonRoot false, at pod or container level", async () => {
    const rs = stack();
    const ctl = find(rs, "controller");
    podOf(ctl).securityContext = { runAsUser: 0 };
    container(ctl, "controller").securityContext.runAsNonRoot = false;
    expect(await messages(podsMeetNamespaceLevel, rs)).toEqual([
      "Deployment llm-ha-controller in namespace llm-ha-edge (enforce restricted) would be refused by Pod Security Admission: the pod runs as UID 0; " +
        "container controller does not run as non-root (runAsNonRoot: true); container controller has no RuntimeDefault or Localhost seccomp profile.",
    ]);
  });

  it("checks a baseline namespace for baseline only, and leaves namespaces the stack does not create alone", async () => {
    const rs = stack("baseline");
    for (const r of edgeWorkloads()) delete podOf(find(rs, r.name)).securityContext;
    expect(await messages(podsMeetNamespaceLevel, rs)).toEqual([]);
    podOf(find(rs, "controller")).hostPID = true;
    expect(await messages(podsMeetNamespaceLevel, rs)).toEqual(["Deployment llm-ha-controller in namespace llm-ha-edge (enforce baseline) would be refused by Pod Security Admission: hostPID is set."]);
    const elsewhere = [...happyStack(), ...edgeWorkloads("apps")];
    podOf(find(elsewhere, "controller")).hostNetwork = true;
    expect(await messages(podsMeetNamespaceLevel, elsewhere)).toEqual([]);
  });

  it("names the host access of the agent and vLLM that keeps their namespace privileged", () => {
    const agent = podOf(find(happyStack(), "agent"));
    expect(podStandardViolations(agent, "baseline")).toEqual(["hostNetwork is set"]);
    expect(podStandardViolations(agent, "restricted")).toContain("container agent does not drop ALL capabilities");
  });
});
