// The GPU nodes' IAM role: vLLM and the agent run on the host network, where IMDS's hop limit
// does not keep a process from the node role's credentials. Code execution in vLLM then holds
// whatever that role holds: with the VPC CNI's policy, it could detach network interfaces or
// unassign the IP addresses of the L1 pods and of other AZs' nodes. The CNI has a role of its
// own (IRSA for aws-node, infra/addons.ts); the GPU node role keeps kubelet's and image pulls'.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { findReferenced, isGpuNodeGroup } from "./conventions";
import { globsOverlap, oneOrMany, statements } from "./iam";
import { joinWords, list, record, str, strings, type Props } from "./props";

const NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup";
const ROLE_TYPE = "aws:iam/role:Role";
const ATTACHMENT_TYPE = "aws:iam/rolePolicyAttachment:RolePolicyAttachment";
const POLICY_ATTACHMENT_TYPE = "aws:iam/policyAttachment:PolicyAttachment";
const ROLE_POLICY_TYPE = "aws:iam/rolePolicy:RolePolicy";
const POLICY_TYPE = "aws:iam/policy:Policy";

/** The EC2 actions that move or remove network interfaces and their addresses. */
export const NETWORK_WRITE_ACTIONS: readonly string[] = Object.freeze([
  "ec2:AssignPrivateIpAddresses",
  "ec2:UnassignPrivateIpAddresses",
  "ec2:AssignIpv6Addresses",
  "ec2:UnassignIpv6Addresses",
  "ec2:AttachNetworkInterface",
  "ec2:DetachNetworkInterface",
  "ec2:DeleteNetworkInterface",
  "ec2:ModifyNetworkInterfaceAttribute",
  "ec2:CreateNetworkInterface",
]);

/** AWS managed policies known to grant some of them (their documents are not in the stack). */
export const NETWORK_WRITE_MANAGED_POLICIES: readonly string[] = Object.freeze([
  "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
  "arn:aws:iam::aws:policy/AmazonEC2FullAccess",
  "arn:aws:iam::aws:policy/PowerUserAccess",
  "arn:aws:iam::aws:policy/AdministratorAccess",
]);

export interface NodeRoleConfig {
  forbiddenActions: string[];
  forbiddenManagedPolicies: string[];
}

/** `arn:aws:iam::aws:policy/X` whatever the partition, by its path and name. */
const policyKey = (arn: string) => arn.replace(/^arn:[^:]+:iam::/, "").toLowerCase();

/** Which of `forbidden` an Allow statement grants (NotAction grants what it does not list). */
function grantedActions(s: Props, forbidden: readonly string[]): string[] {
  if (s.Effect !== "Allow") return [];
  if (s.NotAction !== undefined) return forbidden.filter((w) => !oneOrMany(s.NotAction).some((a) => globsOverlap(a, w)));
  return forbidden.filter((w) => oneOrMany(s.Action).some((a) => globsOverlap(a, w)));
}

interface Grant {
  /** What grants it, for the message. */
  what: string;
  r: PolicyResource;
  managedArn?: string;
  doc?: unknown;
}

/** Everything the stack attaches to or puts in `role`. */
function grantsOf(resources: readonly PolicyResource[], role: PolicyResource): Grant[] {
  const out: Grant[] = [];
  const rp = role.props as Props;
  for (const arn of strings(rp.managedPolicyArns)) out.push({ what: `managed policy ${arn} (managedPolicyArns of role ${role.name})`, r: role, managedArn: arn });
  for (const ip of list(rp.inlinePolicies)) out.push({ what: `an inline policy of role ${role.name}`, r: role, doc: record(ip)?.policy });
  const byArn = (r: PolicyResource, arn: string | undefined, label: string) => {
    if (arn === undefined) return;
    const policy = findReferenced(resources, r, "policyArn", arn, POLICY_TYPE);
    if (policy) out.push({ what: `${label} of policy ${policy.name}`, r, doc: (policy.props as Props).policy });
    else out.push({ what: `${label} of ${arn}`, r, managedArn: arn });
  };
  for (const r of resources) {
    const p = r.props as Props;
    if (r.type === ATTACHMENT_TYPE && findReferenced(resources, r, "role", str(p.role), ROLE_TYPE) === role) byArn(r, str(p.policyArn), `attachment ${r.name}`);
    else if (r.type === POLICY_ATTACHMENT_TYPE) {
      const roles = (r.propertyDependencies.roles ?? []).filter((x) => x.type === ROLE_TYPE);
      if (roles.includes(role) || strings(p.roles).some((n) => findReferenced(resources, { ...r, propertyDependencies: {} }, "roles", n, ROLE_TYPE) === role)) byArn(r, str(p.policyArn), `attachment ${r.name}`);
    } else if (r.type === ROLE_POLICY_TYPE && findReferenced(resources, r, "role", str(p.role), ROLE_TYPE) === role) {
      out.push({ what: `role policy ${r.name}`, r, doc: p.policy });
    }
  }
  return out;
}

export const gpuNodeRoleMinimal: StackValidationPolicy = {
  name: "gpu-node-role-minimal",
  description:
    "A GPU node group's node role holds no EC2 network-interface write (AmazonEKS_CNI_Policy, or any of ec2:AssignPrivateIpAddresses, UnassignPrivateIpAddresses, AttachNetworkInterface, DetachNetworkInterface, DeleteNetworkInterface, ModifyNetworkInterfaceAttribute, CreateNetworkInterface, wildcards included): the VPC CNI takes them through its own IRSA role (L1 node tier: vLLM and the agent share the host network and so the node role; code run there must not be able to move the L1 pods' or other AZs' addresses).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      forbiddenActions: { type: "array", items: { type: "string" }, default: [...NETWORK_WRITE_ACTIONS], description: "Actions a GPU node role may not allow." },
      forbiddenManagedPolicies: { type: "array", items: { type: "string" }, default: [...NETWORK_WRITE_MANAGED_POLICIES], description: "Managed policies (by ARN) a GPU node role may not have." },
    },
  },
  validateStack: (args, reportViolation) => {
    const { forbiddenActions, forbiddenManagedPolicies } = args.getConfig<NodeRoleConfig>();
    const banned = new Set(forbiddenManagedPolicies.map(policyKey));
    const seen = new Set<string>();
    for (const g of args.resources) {
      if (g.type !== NODE_GROUP_TYPE || !isGpuNodeGroup(g.props as Props)) continue;
      const role = findReferenced(args.resources, g, "nodeRoleArn", str((g.props as Props).nodeRoleArn), ROLE_TYPE);
      // A role from outside the stack: its policies are not in it to judge.
      if (!role || seen.has(role.urn)) continue;
      seen.add(role.urn);
      for (const grant of grantsOf(args.resources, role)) {
        if (grant.managedArn !== undefined && banned.has(policyKey(grant.managedArn))) {
          reportViolation(`GPU node role ${role.name} (node group ${g.name}) has ${grant.what}: EC2 network-interface writes on the host network of vLLM; give the VPC CNI its own role (vpc-cni add-on serviceAccountRoleArn) and keep the GPU node role to AmazonEKSWorkerNodePolicy and AmazonEC2ContainerRegistryReadOnly.`, grant.r.urn);
          continue;
        }
        const granted = [...new Set(statements(grant.doc).flatMap((s) => grantedActions(s, forbiddenActions)))];
        if (granted.length > 0) {
          reportViolation(`GPU node role ${role.name} (node group ${g.name}) allows ${joinWords(granted)} through ${grant.what}; GPU nodes must hold no EC2 network-interface write.`, grant.r.urn);
        }
      }
    }
  },
};
