/**
 * The create-time checks (policies/create-order.ts, policies/create-time.ts) over prod's
 * captured graph, with the dependencies and timeouts the register requests carried. Each is
 * clean on the program as it is, and each keeps the deploy blocker it guards as a
 * regression fixture: the same graph with that one thing put back as it was.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Policy } from "@pulumi/policy";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { createOrderFollowsReferences } from "../../policies/create-order";
import { addonVersionsForCluster, clusterAccessEntries, gpuScarceStartAtZero, probesReachable, waitsBounded } from "../../policies/create-time";
import { policies } from "../../policies/all";
import { runPolicies } from "../../policies/runner";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const ADMIN = "arn:aws:iam::123456789012:role/ci-deployer";
const KUBE_ROLE = "arn:aws:iam::123456789012:role/llm-ha-admin";
let graph: CapturedResource[];

beforeAll(async () => {
  graph = await captureStack("prod", { "llm-ha:clusterAdmins": JSON.stringify([ADMIN]), "llm-ha:kubeconfigRoleArn": KUBE_ROLE });
}, 120_000);

/** The graph with `change` applied to a deep copy. */
function regress(change: (rs: CapturedResource[]) => void): CapturedResource[] {
  const rs = structuredClone(graph);
  change(rs);
  return rs;
}
const named = (rs: CapturedResource[], name: string, type?: string) => rs.find((r) => r.name === name && (!type || r.type === type)) ?? expect.fail(`no resource ${name}`);
const DEPLOYMENT = "kubernetes:apps/v1:Deployment";
const urnOf = (name: string) => named(graph, name).urn;
const dropDeps = (r: CapturedResource, ...names: string[]) => {
  const urns = names.map(urnOf);
  r.opts.dependsOn = r.opts.dependsOn.filter((u) => !urns.includes(u));
  for (const k of Object.keys(r.opts.propertyDependencies)) r.opts.propertyDependencies[k] = r.opts.propertyDependencies[k].filter((u) => !urns.includes(u));
};
async function messages(p: Policy, rs: CapturedResource[]): Promise<string[]> {
  return (await runPolicies([p], rs)).map((v) => v.message);
}

describe("the program as it is passes every create-time check", () => {
  it("prod with cluster admins and a kubeconfig role: no violation of the whole pack", async () => {
    expect(graph.filter((r) => r.type === "aws:eks/accessEntry:AccessEntry")).toHaveLength(2);
    expect(await runPolicies(policies, graph)).toEqual([]);
  });
});

describe("create-order-follows-references", () => {
  it("blocker 1: a weighted alias created before the failover records it names", async () => {
    // The layout before weighted records per AZ, put back without the alias's dependsOn.
    const rs = regress((rs) => {
      for (const az of ["us-east-1a", "us-east-1b", "us-east-1c"]) {
        const w = named(rs, `dns-${az}-weighted`);
        const props = w.props as O;
        const target = `${az}.${props.name}`;
        for (const role of ["primary", "secondary"]) {
          const pair = structuredClone(w);
          pair.name = `dns-${az}-${role}`;
          pair.urn = w.urn.replace(/-weighted$/, `-${role}`);
          const pp = pair.props as O;
          delete pp.weightedRoutingPolicies;
          Object.assign(pp, { name: target, setIdentifier: `${az}-${role}`, failoverRoutingPolicies: [{ type: role.toUpperCase() }] });
          pair.opts.dependsOn = [];
          rs.push(pair);
        }
        for (const k of ["records", "ttl", "healthCheckId"]) delete props[k];
        props.aliases = [{ name: target, zoneId: props.zoneId, evaluateTargetHealth: true }];
      }
    });
    const m = await messages(createOrderFollowsReferences, rs);
    expect(m).toHaveLength(3);
    expect(m[0]).toBe(
      "Record dns-us-east-1a-weighted aliases us-east-1a.infer-prod.llm-ha-stand-in.net but does not depend on dns-us-east-1a-primary, dns-us-east-1a-secondary: Route53 refuses an alias whose target record does not exist yet (InvalidChangeBatch … target was not found). Take the name from their Output or add them to dependsOn.",
    );
  });

  it("blocker 6: the cluster created without waiting for AmazonEKSClusterPolicy", async () => {
    const rs = regress((rs) => dropDeps(named(rs, "eks-eks"), "eks-cluster-policy"));
    expect(await messages(createOrderFollowsReferences, rs)).toEqual([
      "Cluster eks-eks takes role eks-cluster-role by ARN but does not depend on eks-cluster-policy: EKS cannot manage the cluster's ENIs without AmazonEKSClusterPolicy, and destroy detaches it first, leaving ENIs and security groups behind. Take the name from their Output or add them to dependsOn.",
    ]);
  });

  it("GPU node groups that do not wait for the node role's policies (a component's dependsOn does not reach them)", async () => {
    const rs = regress((rs) => dropDeps(named(rs, "gpu-us-east-1a-h100"), "eks-gpu-node-worker", "eks-gpu-node-ecr"));
    expect((await messages(createOrderFollowsReferences, rs))[0]).toMatch(/^NodeGroup gpu-us-east-1a-h100 takes role eks-gpu-node-role by ARN but does not depend on eks-gpu-node-worker, eks-gpu-node-ecr/);
  });

  it("an access policy association made before its principal's access entry", async () => {
    const rs = regress((rs) => dropDeps(named(rs, "eks-access-0-admin"), "eks-access-0"));
    expect(await messages(createOrderFollowsReferences, rs)).toEqual([
      `AccessPolicyAssociation eks-access-0-admin names principal ${ADMIN} but does not depend on eks-access-0: EKS refuses an access policy association for a principal without an access entry. Take the name from their Output or add them to dependsOn.`,
    ]);
  });
});

describe("probes-reachable", () => {
  it("blocker 2: the fallback sidecar's httpGet probes with host 127.0.0.1", async () => {
    const rs = regress((rs) => {
      const c = (named(rs, "app-l1-us-east-1a", DEPLOYMENT).props as O).spec.template.spec.containers.find((x: O) => x.name === "fallback");
      c.readinessProbe = { httpGet: { path: "/readyz", port: 9410, host: "127.0.0.1" }, periodSeconds: 5 };
    });
    expect(await messages(probesReachable, rs)).toEqual([
      "app-l1-us-east-1a: container fallback's readinessProbe sets host 127.0.0.1: the kubelet probes from the node, so that is the node's address, not the pod's (set host only with hostNetwork).",
      "app-l1-us-east-1a: container fallback's readinessProbe probes port 9410, which it serves on 127.0.0.1 only: the kubelet's request to the pod IP is refused (probe it with exec inside the container).",
    ]);
  });

  it("a probe on a port the container does not declare", async () => {
    const rs = regress((rs) => {
      const c = (named(rs, "app-l1-us-east-1a", DEPLOYMENT).props as O).spec.template.spec.containers.find((x: O) => x.name === "fallback");
      c.livenessProbe = { tcpSocket: { port: 9999 } };
    });
    expect(await messages(probesReachable, rs)).toEqual(["app-l1-us-east-1a: container fallback's livenessProbe probes port 9999, which is not one of its containerPorts."]);
  });
});

describe("gpu-scarce-start-at-zero", () => {
  it("blocker 3: a p5 On-Demand group without a reservation created at its running size", async () => {
    const rs = regress((rs) => ((named(rs, "gpu-us-east-1a-h100").props as O).scalingConfig.desiredSize = 2));
    expect(await messages(gpuScarceStartAtZero, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 is created with desiredSize 2 of p5.48xlarge On-Demand with no reservation or Capacity Block: an InsufficientInstanceCapacity at creation leaves it CREATE_FAILED. Create it at 0 and scale up after, or cover it.",
    ]);
  });

  it("a reservation covers it", async () => {
    const rs = regress((rs) => {
      (named(rs, "gpu-us-east-1a-h100").props as O).scalingConfig.desiredSize = 2;
      (named(rs, "gpu-us-east-1a-h100-lt").props as O).capacityReservationSpecification = { capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } };
    });
    expect(await messages(gpuScarceStartAtZero, rs)).toEqual([]);
  });
});

describe("addon-versions-for-cluster", () => {
  it("blocker 4: a kube-proxy pin for another Kubernetes version, and an add-on with no version", async () => {
    const rs = regress((rs) => {
      (named(rs, "eks-addon-kube-proxy").props as O).addonVersion = "v1.34.1-eksbuild.2";
      delete (named(rs, "eks-addon-vpc-cni").props as O).addonVersion;
    });
    expect(await messages(addonVersionsForCluster, rs)).toEqual([
      "EKS add-on eks-addon-kube-proxy: kube-proxy v1.34.1-eksbuild.2 is for Kubernetes 1.34, the cluster runs 1.36.",
      "EKS add-on eks-addon-vpc-cni (vpc-cni) names no version: EKS would install its default at create time and never move it.",
    ]);
  });
});

describe("cluster-access-entries", () => {
  it("blocker 5: the kubeconfig's role has no access entry", async () => {
    const rs = regress((rs) => rs.splice(0, rs.length, ...rs.filter((r) => !r.type.startsWith("aws:eks/access"))));
    expect(await messages(clusterAccessEntries, rs)).toEqual([
      `Kubernetes provider eks-k8s authenticates as ${KUBE_ROLE} (kubeconfig --role-arn), which has no access entry with an access policy in the stack: every Kubernetes resource would fail with 401.`,
    ]);
  });

  it("the provider does not wait for the association; an entry without a policy", async () => {
    const rs = regress((rs) => {
      dropDeps(named(rs, "eks-k8s"), "eks-access-0-admin", "eks-access-1-admin");
      rs.splice(rs.indexOf(named(rs, "eks-access-0-admin")), 1);
    });
    expect(await messages(clusterAccessEntries, rs)).toEqual([
      `Access entry eks-access-0 for ${ADMIN} has no access policy association or Kubernetes group: the principal authenticates but may do nothing (403).`,
      `Kubernetes provider eks-k8s does not depend on the access policy association of ${KUBE_ROLE}: the first objects could be applied before it exists (401).`,
    ]);
  });
});

describe("waits-bounded", () => {
  it("blocker 7: the L1 Deployments on the provider's default 10 minutes", async () => {
    const rs = regress((rs) => delete named(rs, "app-l1-us-east-1a", DEPLOYMENT).opts.customTimeouts);
    expect(await messages(waitsBounded, rs)).toEqual([
      "Deployment app-l1-us-east-1a waits with the provider's default timeout: set customTimeouts (create, update) or the pulumi.com/skipAwait annotation.",
    ]);
  });
});
