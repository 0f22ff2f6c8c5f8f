/**
 * What stops a first `pulumi up` on an empty account, checked as the program registers its
 * resources under Pulumi's mocks: each assertion fails on the program before the fix (the
 * Route53 create order, probes the kubelet cannot reach, GPU groups created at a size EC2 may
 * not have, cluster access for the principals that run the program, the cluster's policy
 * attachment, explicit waits).
 */
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureStack, ofType, type CapturedResource } from "../../infra/capture";
import { loopbackProbeCommand } from "../../infra/workloads/fallback";
import { stackFailure } from "./stack-failure";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const ADMIN = "arn:aws:iam::123456789012:role/ci-deployer";
const KUBE_ROLE = "arn:aws:iam::123456789012:role/llm-ha-admin";
let prod: CapturedResource[];
let access: CapturedResource[];

beforeAll(async () => {
  prod = await captureStack("prod");
  access = await captureStack("dev", { "llm-ha:clusterAdmins": JSON.stringify([ADMIN]), "llm-ha:kubeconfigRoleArn": KUBE_ROLE, "aws:profile": "llm-ha-deployer" });
}, 120_000);

const byName = (rs: CapturedResource[], name: string, type: string) => rs.find((r) => r.name === name && r.type === type) ?? expect.fail(`no ${type} ${name}`);

describe("blocker 1: Route53 create order", () => {
  it("the service name's weighted records name their NLBs directly: no alias waits on a record that may not exist yet", () => {
    const records = ofType(prod, "aws:route53/record:Record");
    const weighted = records.filter((r) => r.name.endsWith("-weighted"));
    expect(weighted).toHaveLength(3);
    for (const w of weighted) {
      expect((w.props as O).aliases, w.name).toBeUndefined();
      expect((w.props as O).records[0]).toContain(w.name.replace(/^dns-/, "l1-").replace(/-weighted$/, "-"));
    }
    expect(records).toHaveLength(3);
  });
});

describe("blocker 2: probes the kubelet can reach", () => {
  let server: Server;
  let status = 200;
  let port = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => res.writeHead(status).end());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const exitOf = (cmd: string[]) =>
    new Promise<number>((resolve) => execFile(cmd[0], cmd.slice(1), { timeout: 10_000 }, (err) => resolve(err ? Number((err as { code?: number }).code ?? 1) : 0)));

  it("the fallback sidecar's probes set no host and run inside the container", () => {
    for (const d of ofType(prod, "kubernetes:apps/v1:Deployment").filter((r) => r.name.startsWith("app-l1-"))) {
      const c = (d.props as O).spec.template.spec.containers.find((x: O) => x.name === "fallback");
      for (const probe of [c.readinessProbe, c.livenessProbe]) {
        expect(probe.httpGet, d.name).toBeUndefined();
        expect(probe.exec.command[0]).toBe("node");
        expect(probe.exec.command.join(" ")).toContain("http://127.0.0.1:9410/");
      }
    }
  });

  it("the probe command, run as the kubelet runs it (exit 0 = pass), follows the service's answer", async () => {
    status = 200;
    expect(await exitOf(loopbackProbeCommand(port, "/readyz"))).toBe(0);
    status = 503;
    expect(await exitOf(loopbackProbeCommand(port, "/readyz"))).toBe(1);
    // Nothing listening: fails, within its own 2 s bound.
    expect(await exitOf(loopbackProbeCommand(1, "/readyz"))).toBe(1);
  });
});

describe("blocker 3: capacity at creation", () => {
  it("prod's On-Demand p4d/p5 groups without a reservation are created at 0, and listed to scale up", () => {
    const gpu = ofType(prod, "aws:eks/nodeGroup:NodeGroup").filter((g) => g.name.startsWith("gpu-"));
    expect(gpu.length).toBeGreaterThan(0);
    for (const g of gpu) expect((g.props as O).scalingConfig.desiredSize, g.name).toBe(0);
  });

  it("a group on a reservation is created at 0 too (the reservation may be pending or smaller), and says so in its tag", async () => {
    const rs = await captureStack("prod", {
      "llm-ha:gpuClasses": JSON.stringify([{ name: "h100", desiredPerAz: 2, maxPerAz: 3, capacityReservations: { "us-east-1a": "cr-0123456789abcdef0" } }]),
    });
    const group = (name: string) => byName(rs, name, "aws:eks/nodeGroup:NodeGroup").props as O;
    expect(group("gpu-us-east-1a-h100").scalingConfig).toEqual({ minSize: 0, desiredSize: 0, maxSize: 3 });
    expect(group("gpu-us-east-1b-h100").scalingConfig.desiredSize).toBe(0);
    expect(group("gpu-us-east-1a-h100").tags["llm-ha.io/desired-size-from"]).toBe("create");
  });
});

describe("blocker 5: cluster access for the principals that run the program", () => {
  it("access entries with the cluster-admin policy for clusterAdmins and the kubeconfig's role; the provider waits for them", () => {
    const entries = ofType(access, "aws:eks/accessEntry:AccessEntry").map((e) => (e.props as O).principalArn);
    expect(entries).toEqual([ADMIN, KUBE_ROLE]);
    const assocs = ofType(access, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation");
    expect(assocs.map((a) => (a.props as O).policyArn)).toEqual(Array(2).fill("arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"));
    const provider = byName(access, "eks-k8s", "pulumi:providers:kubernetes");
    for (const a of assocs) expect(provider.opts.dependsOn).toContain(a.urn);
  });

  it("the kubeconfig's get-token runs with the program's profile and the role that has an entry", () => {
    const kubeconfig = JSON.parse((byName(access, "eks-k8s", "pulumi:providers:kubernetes").props as O).kubeconfig);
    const exec = kubeconfig.users[0].user.exec;
    expect(exec.args).toEqual(expect.arrayContaining(["--role-arn", KUBE_ROLE]));
    expect(exec.env).toEqual([{ name: "AWS_PROFILE", value: "llm-ha-deployer" }]);
  });

  it("refuses an assumed-role session ARN, naming what to give instead", async () => {
    const e = await stackFailure({ "llm-ha:clusterAdmins": JSON.stringify(["arn:aws:sts::123456789012:assumed-role/ci/session"]) });
    expect(e.errors.map((x) => x.propertyPath)).toEqual(["llm-ha:clusterAdmins[0]"]);
    expect(e.message).toMatch(/not arn:aws:sts::…:assumed-role/);
  });
});

describe("blocker 6 and the node roles: policies attached before what uses the role", () => {
  it("the cluster depends on its AmazonEKSClusterPolicy attachment; every node group on the node role's", () => {
    const urn = (name: string) => byName(prod, name, "aws:iam/rolePolicyAttachment:RolePolicyAttachment").urn;
    expect(byName(prod, "eks-eks", "aws:eks/cluster:Cluster").opts.dependsOn).toContain(urn("eks-cluster-policy"));
    for (const g of ofType(prod, "aws:eks/nodeGroup:NodeGroup")) {
      // The GPU nodes on their own role, the system nodes on theirs; the CNI's policy is on neither (its own IRSA role).
      const role = g.name.startsWith("eks-system-") ? "eks-system-node" : "eks-gpu-node";
      for (const a of [`${role}-worker`, `${role}-ecr`]) expect(g.opts.dependsOn, `${g.name} → ${a}`).toContain(urn(a));
      expect(g.opts.dependsOn).toContain(byName(prod, `${role}-pull`, "aws:iam/rolePolicy:RolePolicy").urn);
    }
  });
});

describe("blocker 7: explicit waits", () => {
  it("the L1 Deployments wait 20 minutes, by choice", () => {
    const l1 = ofType(prod, "kubernetes:apps/v1:Deployment").filter((r) => r.name.startsWith("app-l1-"));
    expect(l1).toHaveLength(3);
    for (const d of l1) expect(d.opts.customTimeouts, d.name).toEqual({ create: "20m", update: "20m" });
  });
});

describe("namespaces before what lives in them", () => {
  it("every object in a namespace the stack creates depends on that Namespace (the SecurityGroupPolicies included: made before it, the first up failed)", () => {
    const byUrn = new Map(prod.map((r) => [r.urn, r]));
    const after = (r: CapturedResource, seen = new Set<string>()): Set<string> => {
      for (const u of r.opts.dependsOn) {
        if (seen.has(u)) continue;
        seen.add(u);
        const d = byUrn.get(u);
        if (d) after(d, seen);
      }
      return seen;
    };
    const namespaces = ofType(prod, "kubernetes:core/v1:Namespace");
    expect(namespaces.map((n) => (n.props as O).metadata.name).sort()).toEqual(["llm-ha", "llm-ha-edge"]);
    const urnOf = new Map(namespaces.map((n) => [(n.props as O).metadata.name as string, n.urn]));
    const inThem = prod.filter((r) => r.type.startsWith("kubernetes:") && urnOf.has((r.props as O)?.metadata?.namespace));
    expect(inThem.filter((r) => r.type.endsWith(":SecurityGroupPolicy")).length).toBe(2);
    const early = inThem.filter((r) => !after(r).has(urnOf.get((r.props as O).metadata.namespace)!)).map((r) => `${r.type} ${r.name}`);
    expect(early).toEqual([]);
  });
});
