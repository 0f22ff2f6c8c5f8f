/**
 * Two attack paths of the stack, closed in every environment:
 * - the GPU nodes' role held the VPC CNI's EC2 network writes, reachable from vLLM and the agent
 *   on the host network: the CNI now has its own IRSA role (aws-node), the GPU nodes a role of
 *   their own with kubelet's and image pulls' policies only;
 * - the L1 NLBs' `/az/health` listener (:8081) was open to the world, so idle connections could
 *   fail a healthy AZ's Route53 check: the NLBs now carry the stack's frontend group, which
 *   admits the API to clients and :8081 to the committed ROUTE53_HEALTHCHECKS ranges only.
 * Called inside `describeStack`, so it runs for dev, staging and prod.
 */
import { expect, it } from "vitest";
import { ofType, type CapturedResource, type Env } from "../../infra/capture";
import { checkerCidrs, ROUTE53_HEALTHCHECK_SNAPSHOT } from "../../contracts/route53-ranges";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const CNI = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy";
const LB = "service.beta.kubernetes.io/aws-load-balancer";

export function describeNetworkRights(env: Env, resources: () => CapturedResource[]): void {
  const roleNamed = (name: string) => resources().find((r) => r.type === "aws:iam/role:Role" && r.name === name)!;
  /** Policy ARNs attached to the role with this logical name (the attachment's `role` is the role's Output). */
  const attachedTo = (name: string) =>
    ofType(resources(), "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
      .filter((a) => a.opts.propertyDependencies.role?.includes(roleNamed(name).urn))
      .map((a) => (a.props as O).policyArn as string)
      .sort();

  it("gives the VPC CNI its own IRSA role (aws-node) and the GPU nodes a role with kubelet's and image pulls' policies only", () => {
    const cniAttachments = ofType(resources(), "aws:iam/rolePolicyAttachment:RolePolicyAttachment").filter((a) => (a.props as O).policyArn === CNI);
    expect(cniAttachments.map((a) => a.name)).toEqual(["eks-addon-vpc-cni-policy"]);
    expect(attachedTo("eks-addon-vpc-cni-role")).toEqual([CNI]);
    const trust = JSON.parse((roleNamed("eks-addon-vpc-cni-role").props as O).assumeRolePolicy).Statement[0];
    expect(Object.values(trust.Condition.StringEquals)).toContain("system:serviceaccount:kube-system:aws-node");
    const vpcCni = resources().find((r) => r.type === "aws:eks/addon:Addon" && (r.props as O).addonName === "vpc-cni")!;
    expect(vpcCni.opts.propertyDependencies.serviceAccountRoleArn).toEqual([roleNamed("eks-addon-vpc-cni-role").urn]);

    const groups = ofType(resources(), "aws:eks/nodeGroup:NodeGroup");
    const gpu = groups.filter((g) => (g.props as O).amiType === "AL2023_x86_64_NVIDIA");
    const system = groups.filter((g) => g.name.startsWith("eks-system-"));
    expect(gpu.length).toBeGreaterThan(0);
    for (const g of gpu) expect(g.opts.propertyDependencies.nodeRoleArn, g.name).toEqual([roleNamed("eks-gpu-node-role").urn]);
    // The system nodes (controllers, HAProxy) have a role of their own: nothing added there reaches vLLM.
    expect(system.length).toBeGreaterThan(1);
    for (const g of system) expect(g.opts.propertyDependencies.nodeRoleArn).toEqual([roleNamed("eks-system-node-role").urn]);
    const minimal = ["arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly", "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"];
    expect(attachedTo("eks-gpu-node-role")).toEqual(minimal);
    expect(attachedTo("eks-system-node-role")).toEqual(minimal);
    // The GPU groups keep the role every node shared before, renamed by alias: a node group's role
    // cannot change in place, and a replaced GPU group would start empty. Only the system group moves.
    expect(roleNamed("eks-gpu-node-role").opts.aliases).toEqual(["eks-node-role"]);
    for (const what of ["worker", "ecr"]) expect(resources().find((r) => r.name === `eks-gpu-node-${what}`)!.opts.aliases).toEqual([`eks-node-${what}`]);
    expect(resources().find((r) => r.name === "eks-gpu-node-pull")!.opts.aliases).toEqual(["eks-node-pull"]);
    expect(roleNamed("eks-system-node-role").opts.aliases).toBeUndefined();
    // Its only inline policy: the pull through the stack's ECR cache.
    const inline = ofType(resources(), "aws:iam/rolePolicy:RolePolicy").filter((p) => p.opts.propertyDependencies.role?.includes(roleNamed("eks-gpu-node-role").urn));
    expect(inline.map((p) => JSON.parse(String((p.props as O).policy)).Statement.flatMap((s: O) => s.Action))).toEqual([["ecr:CreateRepository", "ecr:BatchImportUpstreamImage"]]);
  });

  it("opens each L1 NLB's API listener to clients and its /az/health listener (:8081) to Route53's health checkers only", () => {
    const sg = resources().find((r) => r.type === "aws:ec2/securityGroup:SecurityGroup" && r.name === "fence-l1-nlb")!;
    expect(sg).toBeDefined();
    const services = ofType(resources(), "kubernetes:core/v1:Service").filter((s) => (s.props as O).spec?.type === "LoadBalancer");
    expect(services.length).toBeGreaterThan(0);
    for (const s of services) {
      const annotations = (s.props as O).metadata.annotations;
      expect(annotations[`${LB}-security-groups`], s.name).toBe("fence-l1-nlb-id");
      expect(annotations[`${LB}-manage-backend-security-group-rules`], s.name).toBe("true");
      expect((s.props as O).spec.ports.map((p: O) => p.port)).toContain(8081);
      expect((s.props as O).spec.loadBalancerSourceRanges).toBeUndefined();
    }
    const rules = ofType(resources(), "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
      .map((r) => r.props as O)
      .filter((r) => r.securityGroupId === "fence-l1-nlb-id");
    const apiPort = env === "dev" ? 80 : 443;
    expect(rules.filter((r) => r.fromPort === apiPort).map((r) => [r.cidrIpv4, r.toPort])).toEqual([["0.0.0.0/0", apiPort]]);
    const health = rules.filter((r) => r.fromPort === 8081);
    for (const r of health) expect(r.toPort).toBe(8081);
    expect(health.map((r) => r.cidrIpv4).sort()).toEqual(checkerCidrs().ipv4);
    // Every checker region of the snapshot, and its GLOBAL block; none of another service's.
    expect(health.map((r) => r.cidrIpv4)).toContain("15.177.0.0/18");
    expect(health.map((r) => r.cidrIpv4)).toContain("107.23.255.0/26");
    expect(health).toHaveLength(17);
    expect(ROUTE53_HEALTHCHECK_SNAPSHOT.syncToken).toMatch(/^\d+$/);
    // Nothing else on the NLB's group.
    expect(rules.filter((r) => r.fromPort !== apiPort && r.fromPort !== 8081)).toEqual([]);
  });
}
