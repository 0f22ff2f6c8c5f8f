import { describe, expect, it } from "vitest";
import { podSecurity } from "../../policies/pod-security";
import type { CapturedResource } from "../../policies/runner";
import { controllerManifests } from "../../infra/workloads/controller";
import { at, find, happyStack, messages } from "./fixtures";

function namespace(name: string, labels: Record<string, string>): CapturedResource {
  const type = "kubernetes:core/v1:Namespace";
  return { type, name: `ns-${name}`, urn: `urn:pulumi:test::llm-ha::${type}::ns-${name}`, props: { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } } };
}

describe("pod-security", () => {
  it("passes the fixture: the agent on the host network in llm-ha, a namespace with its enforce level", async () => {
    const rs = [...happyStack(), namespace("llm-ha", { "pod-security.kubernetes.io/enforce": "privileged" })];
    at(find(rs, "agent").props, "spec.template.spec").hostNetwork = true;
    expect(await messages(podSecurity, rs)).toEqual([]);
  });

  it("refuses a privileged container anywhere, even in llm-ha", async () => {
    const rs = happyStack();
    const spec = at(find(rs, "agent").props, "spec.template.spec");
    (spec.containers as Record<string, unknown>[])[0].securityContext = { privileged: true };
    expect(await messages(podSecurity, rs)).toEqual(["llm-ha-agent: container agent runs privileged; grant the one capability it needs instead."]);
  });

  it("refuses host network, hostPath and added capabilities outside the allowed namespaces", async () => {
    const rs = happyStack();
    const inf = find(rs, "inference-us-east-1a").props;
    (inf.metadata as Record<string, unknown>).namespace = "apps";
    const spec = at(inf, "spec.template.spec");
    spec.hostNetwork = true;
    spec.volumes = [{ name: "cache", hostPath: { path: "/mnt/cache" } }];
    (spec.containers as Record<string, unknown>[])[0].securityContext = { capabilities: { add: ["SYS_ADMIN", "NET_BIND_SERVICE"] } };
    expect(await messages(podSecurity, rs)).toEqual([
      "inference-us-east-1a in namespace apps has host access (hostNetwork; hostPath volume cache; container vllm adds SYS_ADMIN); only llm-ha and kube-system may run such pods.",
    ]);
    expect(await messages(podSecurity, rs, { "pod-security": { hostNamespaces: ["apps", "llm-ha"] } })).toEqual([]);
  });

  it("refuses a namespace without a Pod Security Admission enforce level", async () => {
    const rs = [...happyStack(), namespace("llm-ha", { "app.kubernetes.io/part-of": "llm-ha" }), namespace("edge", { "pod-security.kubernetes.io/enforce": "strict" })];
    expect(await messages(podSecurity, rs)).toEqual([
      "Namespace llm-ha has no pod-security.kubernetes.io/enforce label (privileged, baseline or restricted).",
      "Namespace edge has no pod-security.kubernetes.io/enforce label (privileged, baseline or restricted).",
    ]);
  });
});

describe("pod-security with the two namespaces (restricted wherever possible)", () => {
  const PSA = (enforce: string) => ({ "pod-security.kubernetes.io/enforce": enforce, "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted" });
  const layout = () => [...happyStack(), namespace("llm-ha", PSA("privileged")), namespace("llm-ha-edge", PSA("restricted")), edgeDeployment()];

  it("accepts the host's pods in llm-ha (privileged) and the controller in llm-ha-edge (restricted)", async () => {
    expect(await messages(podSecurity, layout())).toEqual([]);
  });

  it("refuses a pod with host access in the edge namespace", async () => {
    const rs = layout();
    at(find(rs, "controller").props, "spec.template.spec").hostNetwork = true;
    expect(await messages(podSecurity, rs)).toEqual(["llm-ha-controller in namespace llm-ha-edge has host access (hostNetwork); only llm-ha and kube-system may run such pods."]);
  });

  it("refuses the edge namespace (or any but the host namespaces) enforced at anything but restricted", async () => {
    for (const level of ["privileged", "baseline"]) {
      const rs = [...happyStack(), namespace("llm-ha", PSA("privileged")), namespace("llm-ha-edge", PSA(level))];
      expect(await messages(podSecurity, rs)).toEqual([`Namespace llm-ha-edge enforces ${level}: only llm-ha and kube-system may enforce less than restricted (their pods need the host); enforce restricted.`]);
    }
    expect(await messages(podSecurity, [...happyStack(), namespace("llm-ha-edge", {})])).toEqual(["Namespace llm-ha-edge has no pod-security.kubernetes.io/enforce label (privileged, baseline or restricted)."]);
  });
});

/** The controller as infra/workloads/controller.ts renders it, in the edge namespace. */
function edgeDeployment(): CapturedResource {
  const { deployment } = controllerManifests({ namespace: "llm-ha-edge", image: `agent@sha256:${"ab".repeat(32)}`, clusterName: "prod", redisSecretName: "llm-ha-redis", replicas: 3 });
  const type = "kubernetes:apps/v1:Deployment";
  return { type, name: "controller", urn: `urn:pulumi:test::llm-ha::${type}::controller`, props: structuredClone(deployment) as unknown as Record<string, unknown> };
}
