import { describe, expect, it } from "vitest";
import { gpuNodeRoleMinimal } from "../../policies/node-role";
import type { CapturedResource } from "../../policies/runner";
import { happyStack, messages } from "./fixtures";

const urn = (type: string, name: string) => `urn:pulumi:test::llm-ha::${type}::${name}`;
function res(type: string, name: string, props: Record<string, unknown>, propertyDependencies: Record<string, string[]> = {}): CapturedResource {
  return { type, name, urn: urn(type, name), props, opts: { propertyDependencies } };
}

const ROLE = "aws:iam/role:Role";
const ATTACH = "aws:iam/rolePolicyAttachment:RolePolicyAttachment";
const ROLE_URN = urn(ROLE, "gpu-node-role");
const SYSTEM_URN = urn(ROLE, "system-node-role");
const WORKER = "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy";
const ECR = "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly";
const CNI = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy";

/** The happy stack with its GPU node groups on a role of the stack holding `extra` beside the minimal pair, and a system role. */
function stack(extra: CapturedResource[] = []): CapturedResource[] {
  const rs = happyStack();
  for (const g of rs.filter((r) => r.type === "aws:eks/nodeGroup:NodeGroup")) {
    g.props.nodeRoleArn = "arn:aws:iam::123456789012:role/gpu-node";
    g.opts = { propertyDependencies: { nodeRoleArn: [ROLE_URN] } };
  }
  const attach = (name: string, role: string, arn: string) => res(ATTACH, name, { role: "gpu-node", policyArn: arn }, { role: [role] });
  return [
    ...rs,
    res(ROLE, "gpu-node-role", { assumeRolePolicy: "{}" }),
    res(ROLE, "system-node-role", { assumeRolePolicy: "{}" }),
    attach("gpu-worker", ROLE_URN, WORKER),
    attach("gpu-ecr", ROLE_URN, ECR),
    // The system nodes' role is not a GPU node group's: what it holds is not this policy's concern.
    attach("system-cni", SYSTEM_URN, CNI),
    ...extra,
  ];
}

describe("gpu-node-role-minimal", () => {
  it("passes a GPU node role with the worker and ECR read-only policies", async () => {
    expect(await messages(gpuNodeRoleMinimal, stack())).toEqual([]);
  });

  it("refuses the CNI policy attached to the GPU node role (by ARN, as the pack sees managed policies)", async () => {
    const found = await messages(gpuNodeRoleMinimal, stack([res(ATTACH, "gpu-cni", { role: "gpu-node", policyArn: CNI }, { role: [ROLE_URN] })]));
    expect(found).toEqual([
      `GPU node role gpu-node-role (node group gpu-us-east-1a-h100) has attachment gpu-cni of ${CNI}: EC2 network-interface writes on the host network of vLLM; give the VPC CNI its own role (vpc-cni add-on serviceAccountRoleArn) and keep the GPU node role to AmazonEKSWorkerNodePolicy and AmazonEC2ContainerRegistryReadOnly.`,
    ]);
  });

  it("finds the role by its name when no dependency is recorded, and the CNI policy in managedPolicyArns", async () => {
    const rs = stack();
    const role = rs.find((r) => r.name === "gpu-node-role")!;
    role.props.name = "gpu-node";
    role.props.managedPolicyArns = ["arn:aws-us-gov:iam::aws:policy/AmazonEKS_CNI_Policy"];
    rs.push(res(ATTACH, "gpu-cni-by-name", { role: "gpu-node", policyArn: CNI }));
    const found = await messages(gpuNodeRoleMinimal, rs);
    expect(found).toHaveLength(2);
    expect(found[0]).toMatch(/has managed policy arn:aws-us-gov:iam::aws:policy\/AmazonEKS_CNI_Policy \(managedPolicyArns of role gpu-node-role\)/);
    expect(found[1]).toMatch(/has attachment gpu-cni-by-name of /);
  });

  const doc = (statement: Record<string, unknown>) => JSON.stringify({ Version: "2012-10-17", Statement: [statement] });
  for (const [what, statement, granted] of [
    ["one network write", { Effect: "Allow", Action: "ec2:UnassignPrivateIpAddresses", Resource: "*" }, "ec2:UnassignPrivateIpAddresses"],
    ["ec2:*", { Effect: "Allow", Action: ["ec2:*"], Resource: "*" }, "ec2:AssignPrivateIpAddresses"],
    ["a wildcard on the interface actions", { Effect: "Allow", Action: "ec2:*NetworkInterface", Resource: "*" }, "ec2:AttachNetworkInterface"],
    ["NotAction", { Effect: "Allow", NotAction: "s3:*", Resource: "*" }, "ec2:DetachNetworkInterface"],
  ] as const) {
    it(`refuses ${what} in an inline role policy of the GPU node role`, async () => {
      const found = await messages(gpuNodeRoleMinimal, stack([res("aws:iam/rolePolicy:RolePolicy", "gpu-extra", { role: "gpu-node", policy: doc(statement) }, { role: [ROLE_URN] })]));
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(/^GPU node role gpu-node-role \(node group gpu-us-east-1a-h100\) allows .* through role policy gpu-extra; GPU nodes must hold no EC2 network-interface write\.$/);
      expect(found[0]).toContain(granted);
    });
  }

  it("refuses a customer managed policy of the stack attached to the GPU node role, judged by its document; lets a Deny and read-only actions through", async () => {
    const policyUrn = urn("aws:iam/policy:Policy", "net-admin");
    const bad = [
      res("aws:iam/policy:Policy", "net-admin", { policy: doc({ Effect: "Allow", Action: ["ec2:DeleteNetworkInterface", "ec2:DescribeInstances"], Resource: "*" }) }),
      res(ATTACH, "gpu-net-admin", { role: "gpu-node", policyArn: "arn:aws:iam::123456789012:policy/net-admin" }, { role: [ROLE_URN], policyArn: [policyUrn] }),
    ];
    expect(await messages(gpuNodeRoleMinimal, stack(bad))).toEqual([
      "GPU node role gpu-node-role (node group gpu-us-east-1a-h100) allows ec2:DeleteNetworkInterface through attachment gpu-net-admin of policy net-admin; GPU nodes must hold no EC2 network-interface write.",
    ]);
    const fine = [
      res("aws:iam/rolePolicy:RolePolicy", "gpu-deny", { role: "gpu-node", policy: doc({ Effect: "Deny", Action: "ec2:*", Resource: "*" }) }, { role: [ROLE_URN] }),
      res("aws:iam/rolePolicy:RolePolicy", "gpu-describe", { role: "gpu-node", policy: doc({ Effect: "Allow", Action: "ec2:Describe*", Resource: "*" }) }, { role: [ROLE_URN] }),
    ];
    expect(await messages(gpuNodeRoleMinimal, stack(fine))).toEqual([]);
  });

  it("skips a node role from outside the stack (nothing of it to judge)", async () => {
    expect(await messages(gpuNodeRoleMinimal, happyStack())).toEqual([]);
  });
});
