/**
 * What `npm run policy -- --stack prod` runs (the program under Pulumi's mocks, then the whole
 * pack), over prod and three variants of it: the old Redis AUTH token alone, the VPC CNI's
 * policy back on the GPU nodes' role, and the NLBs' /az/health listener open to the world. The
 * committed prod passes; each variant is refused by its policy, and by that one alone.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { mandatory, runPolicies } from "../../policies/runner";
import { captureStack, TEST_REDIS_TOKEN, type CapturedResource } from "../../infra/capture";
import { testTempDir } from "../support/temp-dir";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const ROOT = path.resolve(__dirname, "..", "..");
const CNI = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy";
const refusals = async (rs: CapturedResource[]) => mandatory(await runPolicies(policies, rs)).map((v) => [v.policy, v.urn, v.message]);

describe("the pack refuses each opening an attacker used, over the prod stack", () => {
  let rs: CapturedResource[];
  beforeAll(async () => {
    rs = await captureStack("prod");
  });

  it("passes prod as committed", async () => {
    expect(await refusals(rs)).toEqual([]);
  });

  it("refuses a GPU node role with the CNI policy attached", async () => {
    const broken = structuredClone(rs);
    const role = broken.find((r) => r.type === "aws:iam/role:Role" && r.name === "eks-gpu-node-role")!;
    const type = "aws:iam/rolePolicyAttachment:RolePolicyAttachment";
    const attachment: CapturedResource = {
      type,
      name: "eks-gpu-node-cni",
      urn: `urn:pulumi:prod::llm-ha::${type}::eks-gpu-node-cni`,
      props: { role: "eks-gpu-node-role", policyArn: CNI },
      opts: { ignoreChanges: [], dependsOn: [role.urn], propertyDependencies: { role: [role.urn] } },
    };
    broken.push(attachment);
    // As the program would: every GPU group waits for its role's attachments (create-order-follows-references).
    for (const g of broken.filter((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && r.name.startsWith("gpu-"))) g.opts.dependsOn.push(attachment.urn);
    const found = await refusals(broken);
    expect(found.map(([p, u]) => [p, u])).toEqual([["gpu-node-role-minimal", attachment.urn]]);
    expect(found[0][2]).toMatch(/^GPU node role eks-gpu-node-role \(node group gpu-us-east-1a-a100\) has attachment eks-gpu-node-cni of arn:aws:iam::aws:policy\/AmazonEKS_CNI_Policy/);
  });

  it("refuses the GPU node groups on the system nodes' role once that role holds the CNI policy again", async () => {
    const broken = structuredClone(rs);
    const system = broken.find((r) => r.type === "aws:iam/role:Role" && r.name === "eks-system-node-role")!;
    for (const g of broken.filter((r) => r.type === "aws:eks/nodeGroup:NodeGroup")) g.opts.propertyDependencies.nodeRoleArn = [system.urn];
    const worker = broken.find((r) => r.name === "eks-system-node-worker")!;
    (worker.props as O).policyArn = CNI;
    // (create-order-follows-references also flags the GPU groups, which do not wait for that role's attachments.)
    expect((await refusals(broken)).filter(([p]) => p === "gpu-node-role-minimal").map(([p, u]) => [p, u])).toEqual([["gpu-node-role-minimal", worker.urn]]);
  });

  it("refuses :8081 open to the world on the NLBs' frontend group", async () => {
    const broken = structuredClone(rs);
    const rule = broken.find((r) => r.type === "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule" && (r.props as O).securityGroupId === "fence-l1-nlb-id" && (r.props as O).fromPort === 8081)!;
    (rule.props as O).cidrIpv4 = "0.0.0.0/0";
    const found = await refusals(broken);
    expect(found.map(([p, u]) => [p, u])).toEqual([["az-health-from-route53-only", rule.urn]]);
    expect(found[0][2]).toMatch(/opens :8081 \(\/az\/health\) to 0\.0\.0\.0\/0: anyone can hold its connections/);
  });

  it("refuses the NLB Services once they lose the frontend group (the controller's own opens every listener)", async () => {
    const broken = structuredClone(rs);
    const services = broken.filter((r) => r.type === "kubernetes:core/v1:Service" && (r.props as O).spec.type === "LoadBalancer");
    for (const s of services) delete (s.props as O).metadata.annotations["service.beta.kubernetes.io/aws-load-balancer-security-groups"];
    expect((await refusals(broken)).map(([p, u]) => [p, u])).toEqual(services.map((s) => ["az-health-from-route53-only", s.urn]));
  });

  it("refuses a token-only Redis in prod, naming llm-ha:redisRolePasswords; a token-only dev passes with the program's warning", async () => {
    const tokenOnly = await captureStack("prod", { "llm-ha:redisAuthToken": TEST_REDIS_TOKEN });
    const rg = tokenOnly.find((r) => r.type === "aws:elasticache/replicationGroup:ReplicationGroup")!;
    expect((rg.props as O).authToken).toBe(TEST_REDIS_TOKEN);
    const found = await refusals(tokenOnly);
    expect(found.map(([p, u]) => [p, u])).toEqual([["redis-roles-required", rg.urn]]);
    expect(found[0][2]).toMatch(/^Redis redis-rg \(prod\) authenticates with the AUTH token alone: .*Set llm-ha:redisRolePasswords/);
    const dev = await captureStack("dev", { "llm-ha:redisAuthToken": TEST_REDIS_TOKEN });
    expect(await refusals(dev)).toEqual([]);
  });
});

describe("npm run policy -- --stack <a token-only prod file>", () => {
  it("exits 1 on redis-roles-required", async () => {
    const dir = testTempDir("policy-refusal-");
    const file = path.join(dir, "Pulumi.prod.yaml");
    const yaml = fs.readFileSync(path.join(ROOT, "Pulumi.prod.yaml"), "utf8").replace("config:\n", "config:\n  llm-ha:redisAuthToken:\n    secure: v1:AAAABBBBCCCCDDDDEEEEFFFF\n");
    fs.writeFileSync(file, yaml);
    const r = await promisify(execFile)(path.join(ROOT, "node_modules", ".bin", "tsx"), ["policies/cli.ts", "--stack", file], { cwd: ROOT }).then(
      (x) => ({ code: 0, stdout: x.stdout }),
      (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
    );
    expect(r.code, r.stdout).toBe(1);
    expect(r.stdout).toMatch(/^redis-roles-required\s+mandatory\s+ReplicationGroup redis-rg\s+Redis redis-rg \(prod\) authenticates with the AUTH token alone/m);
    expect(r.stdout).toMatch(/prod: \d+ resources, \d+ policies, 1 mandatory/);
  }, 120_000);
});
