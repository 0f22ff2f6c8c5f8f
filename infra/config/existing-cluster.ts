import { isObj, type Obj, type Settings } from "./read";
import type { GpuClassConfig, GpuClassName } from "./gpu";

/**
 * `llm-ha:existingCluster`: run llm-ha's runtime on an EKS cluster the stack does not own
 * ("bring your own cluster", docs/infra.md "Existing cluster"). The stack then creates no VPC,
 * no cluster and no node groups of its own; what is not given here is discovered from the
 * cluster at `pulumi up` (`aws eks describe-cluster`, the VPC's subnets by their load balancer
 * role tags).
 */
export interface ExistingClusterConfig {
  /** The EKS cluster's name. */
  name: string;
  /** The IAM OIDC provider of the cluster's issuer (IRSA). Default: looked up by the issuer's URL. */
  oidcProviderArn?: string;
  /** The cluster's VPC. Default: the cluster's own (`vpcConfig.vpcId`). */
  vpcId?: string;
  /**
   * Per AZ of `llm-ha:azs`, the private subnets (Redis, MSK, Karpenter's GPU nodes) and the one
   * public subnet of that AZ's NLB. Default: the VPC's subnets in each AZ tagged
   * `kubernetes.io/role/internal-elb` (private) and `kubernetes.io/role/elb` (public), the tags the
   * load balancer controller reads too.
   */
  subnets?: Record<string, { private: string[]; public: string }>;
}

/** Where the GPU capacity of an existing cluster comes from (`llm-ha:capacity`). */
export type CapacityConfig =
  /** The stack's own managed node groups (a stack that creates its cluster; the only choice there). */
  | { engine: "own" }
  /**
   * Managed node groups the operator runs, adopted by name: per AZ and GPU class the group, and
   * per class the standby AZ's fallback group. llm-ha labels nothing it does not own: the groups
   * must carry llm-ha's node labels and the GPU taint already (preflight checks them).
   */
  | { engine: "nodeGroups"; groups: Record<string, Partial<Record<GpuClassName, string>>>; fallback: Partial<Record<GpuClassName, string>> }
  /**
   * Karpenter NodePools the stack creates per AZ and GPU class, on an EC2NodeClass it creates
   * (`nodeClass` absent) or an existing one adopted by name. `amiAlias`: the created class's AMI
   * (`al2023@<version>`; Karpenter picks the NVIDIA variant for GPU types). `nodeRole`: the created
   * class's node role by name, one the Karpenter controller may pass (its policy usually allows
   * `KarpenterNodeRole-*` only); absent, the stack creates one and its access entry.
   */
  | { engine: "karpenter"; nodeClass?: string; nodeRole?: string; amiAlias: string };

const SUBNET = /^subnet-[0-9a-f]{8,17}$/;
/** A Kubernetes object name (DNS-1123 subdomain, short form). */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** An EKS node group or cluster name. */
const EKS_NAME = /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/;
/** Karpenter's AMI alias: `al2023@latest` or `al2023@v20251117`. */
const AMI_ALIAS = /^(al2023|al2|bottlerocket)@(latest|v\d{8}|v\d+\.\d+\.\d+)$/;

/** Settings of a stack that creates its own cluster: refused beside `llm-ha:existingCluster`, naming why. */
const OWN_CLUSTER_ONLY: Record<string, string> = {
  clusterName: "the cluster's name is llm-ha:existingCluster.name",
  network: "the existing cluster's VPC is used (llm-ha:existingCluster.vpcId, or the cluster's own)",
  systemNodes: "the existing cluster's nodes labelled llm-ha.io/node-role=system run the controller and the L1 proxies",
  apiEndpoint: "the existing cluster's API endpoint is the operator's (pulumi up reaches it as kubectl does)",
  kubernetesVersion: "the existing cluster's version is read from it (llm-ha preflight checks its support window)",
  addonVersions: "the existing cluster's add-ons are the operator's (llm-ha preflight checks the ones llm-ha needs)",
  clusterAdmins: "access to the existing cluster is the operator's (access entries)",
  gpuFastImagePull: "the GPU nodes' launch settings are the node groups' or the EC2NodeClass's",
};

/** `llm-ha:existingCluster`, or undefined for a stack that creates its cluster. */
export function existingClusterOf(s: Settings, azs: string[]): ExistingClusterConfig | undefined {
  const { cfg, p, key } = s;
  if (cfg.get("existingCluster") === undefined) return undefined;
  const o = s.obj("existingCluster");
  const k = key("existingCluster");
  const name = s.str(o, "name", `${k}.name`);
  if (name && !EKS_NAME.test(name)) p.add(`${k}.name`, `${JSON.stringify(name)} is not an EKS cluster name (aws eks list-clusters)`);
  for (const extra of Object.keys(o).filter((x) => !["name", "oidcProviderArn", "vpcId", "subnets"].includes(x))) {
    p.add(`${k}.${extra}`, "unknown key; known: name, oidcProviderArn, vpcId, subnets");
  }
  const out: ExistingClusterConfig = { name };
  if (o.oidcProviderArn !== undefined) {
    if (typeof o.oidcProviderArn !== "string" || !/^arn:aws[a-z-]*:iam::\d{12}:oidc-provider\/.+$/.test(o.oidcProviderArn)) {
      p.add(`${k}.oidcProviderArn`, "must be an IAM OIDC provider ARN (arn:aws:iam::<account>:oidc-provider/oidc.eks.<region>.amazonaws.com/id/…; aws iam list-open-id-connect-providers)");
    } else out.oidcProviderArn = o.oidcProviderArn;
  }
  if (o.vpcId !== undefined) {
    if (typeof o.vpcId !== "string" || !/^vpc-[0-9a-f]{8,17}$/.test(o.vpcId)) p.add(`${k}.vpcId`, "must look like vpc-0123456789abcdef0");
    else out.vpcId = o.vpcId;
  }
  if (o.subnets !== undefined) out.subnets = subnetsOf(s, o.subnets, `${k}.subnets`, azs);
  for (const [setting, why] of Object.entries(OWN_CLUSTER_ONLY)) {
    if (cfg.get(setting) !== undefined) p.add(key(setting), `does not apply with ${k}: ${why}; remove it`);
  }
  return out;
}

function subnetsOf(s: Settings, v: unknown, path: string, azs: string[]): Record<string, { private: string[]; public: string }> {
  const out: Record<string, { private: string[]; public: string }> = {};
  if (!isObj(v)) {
    s.p.add(path, "must map each AZ of llm-ha:azs to {private: [subnet-…], public: subnet-…}");
    return out;
  }
  for (const az of azs) if (v[az] === undefined) s.p.add(`${path}.${az}`, "is missing: give every AZ of llm-ha:azs its subnets, or leave subnets out to discover them");
  for (const [az, e] of Object.entries(v)) {
    if (!azs.includes(az)) {
      s.p.add(`${path}.${az}`, `${az} is not one of llm-ha:azs`);
      continue;
    }
    const priv = isObj(e) ? e.private : undefined;
    const pub = isObj(e) ? e.public : undefined;
    if (!Array.isArray(priv) || priv.length === 0 || !priv.every((x) => typeof x === "string" && SUBNET.test(x))) {
      s.p.add(`${path}.${az}.private`, "must be a non-empty list of subnet ids (subnet-…) in that AZ");
      continue;
    }
    if (typeof pub !== "string" || !SUBNET.test(pub)) {
      s.p.add(`${path}.${az}.public`, "must be the subnet id (subnet-…) of the AZ's public subnet, where its NLB goes");
      continue;
    }
    out[az] = { private: priv as string[], public: pub };
  }
  return out;
}

/** Per GPU class a node group name (`{h100: gpu-h100-a}`). */
function groupNamesOf(s: Settings, v: unknown, path: string, classes: GpuClassConfig[]): Partial<Record<GpuClassName, string>> {
  const out: Partial<Record<GpuClassName, string>> = {};
  if (!isObj(v)) {
    s.p.add(path, "must map each GPU class to the name of a managed node group (aws eks list-nodegroups)");
    return out;
  }
  for (const [cls, name] of Object.entries(v)) {
    if (!classes.some((c) => c.name === cls)) s.p.add(`${path}.${cls}`, `${cls} is not one of llm-ha:gpuClasses`);
    else if (typeof name !== "string" || !EKS_NAME.test(name)) s.p.add(`${path}.${cls}`, "must be a managed node group name");
    else out[cls as GpuClassName] = name;
  }
  return out;
}

/**
 * `llm-ha:capacity`: with an existing cluster, `engine: nodeGroups` (adopted by name) or
 * `engine: karpenter` (NodePools the stack creates); without one, the stack's own groups only.
 */
export function capacityOf(s: Settings, existing: ExistingClusterConfig | undefined, azs: string[], standbyAz: string | undefined, classes: GpuClassConfig[]): CapacityConfig {
  const { p, key } = s;
  const k = key("capacity");
  if (s.cfg.get("capacity") === undefined) {
    if (existing !== undefined) p.add(k, `is required with ${key("existingCluster")}: engine: karpenter (NodePools per AZ) or engine: nodeGroups (your managed node groups, by name)`);
    return { engine: "own" };
  }
  const o: Obj = s.obj("capacity");
  if (existing === undefined) {
    p.add(k, `applies to an existing cluster only (${key("existingCluster")}); a stack that creates its cluster creates its GPU node groups`);
    return { engine: "own" };
  }
  if (o.engine === "karpenter") {
    const kc = o.karpenter === undefined ? {} : o.karpenter;
    if (!isObj(kc)) {
      p.add(`${k}.karpenter`, "must be an object {nodeClass?, nodeRole?, amiAlias?}");
      return { engine: "karpenter", amiAlias: "al2023@latest" };
    }
    const out: CapacityConfig = { engine: "karpenter", amiAlias: "al2023@latest" };
    if (kc.nodeClass !== undefined) {
      if (typeof kc.nodeClass !== "string" || !OBJECT_NAME.test(kc.nodeClass)) p.add(`${k}.karpenter.nodeClass`, "must be the name of an EC2NodeClass (kubectl get ec2nodeclasses)");
      else out.nodeClass = kc.nodeClass;
      if (kc.amiAlias !== undefined) p.add(`${k}.karpenter.amiAlias`, "applies to the EC2NodeClass the stack creates, not to an adopted nodeClass");
      if (kc.nodeRole !== undefined) p.add(`${k}.karpenter.nodeRole`, "applies to the EC2NodeClass the stack creates, not to an adopted nodeClass");
    }
    if (kc.nodeRole !== undefined && kc.nodeClass === undefined) {
      if (typeof kc.nodeRole !== "string" || !/^[\w+=,.@-]{1,64}$/.test(kc.nodeRole)) p.add(`${k}.karpenter.nodeRole`, "must be an IAM role name (not an ARN)");
      else out.nodeRole = kc.nodeRole;
    }
    for (const extra of Object.keys(kc).filter((x) => !["nodeClass", "nodeRole", "amiAlias"].includes(x))) p.add(`${k}.karpenter.${extra}`, "unknown key; known: nodeClass, nodeRole, amiAlias");
    if (kc.amiAlias !== undefined && kc.nodeClass === undefined) {
      if (typeof kc.amiAlias !== "string" || !AMI_ALIAS.test(kc.amiAlias)) p.add(`${k}.karpenter.amiAlias`, "must look like al2023@v20251117 (or al2023@latest)");
      else out.amiAlias = kc.amiAlias;
    }
    if (o.nodeGroups !== undefined) p.add(`${k}.nodeGroups`, "does not apply with engine: karpenter");
    return out;
  }
  if (o.engine === "nodeGroups") {
    if (o.karpenter !== undefined) p.add(`${k}.karpenter`, "does not apply with engine: nodeGroups");
    const ng = o.nodeGroups;
    const groups: Record<string, Partial<Record<GpuClassName, string>>> = {};
    let fallback: Partial<Record<GpuClassName, string>> = {};
    if (!isObj(ng)) {
      p.add(`${k}.nodeGroups`, `is required with engine: nodeGroups: {<az>: {<gpu class>: <node group name>}, fallback?: {<gpu class>: <name>}}`);
      return { engine: "nodeGroups", groups, fallback };
    }
    for (const az of azs) {
      if (ng[az] === undefined) {
        p.add(`${k}.nodeGroups.${az}`, "is missing: every AZ of llm-ha:azs needs its node group per GPU class");
        continue;
      }
      groups[az] = groupNamesOf(s, ng[az], `${k}.nodeGroups.${az}`, classes);
      for (const c of classes) if (isObj(ng[az]) && ng[az][c.name] === undefined) p.add(`${k}.nodeGroups.${az}.${c.name}`, `is missing: the ${c.name} node group of ${az}`);
    }
    for (const extra of Object.keys(ng).filter((x) => x !== "fallback" && !azs.includes(x))) p.add(`${k}.nodeGroups.${extra}`, `${extra} is neither one of llm-ha:azs nor fallback`);
    if (ng.fallback !== undefined) {
      if (standbyAz === undefined) p.add(`${k}.nodeGroups.fallback`, "the standby AZ's fallback groups need llm-ha:standbyAz");
      fallback = groupNamesOf(s, ng.fallback, `${k}.nodeGroups.fallback`, classes);
    }
    const names = [...Object.values(groups).flatMap((g) => Object.values(g)), ...Object.values(fallback)];
    const twice = names.filter((n, i) => names.indexOf(n) !== i);
    if (twice.length) p.add(`${k}.nodeGroups`, `${twice[0]} is listed twice: a node group is in one AZ and of one class`);
    return { engine: "nodeGroups", groups, fallback };
  }
  p.add(`${k}.engine`, `must be "karpenter" or "nodeGroups", got ${JSON.stringify(o.engine)}`);
  return { engine: "own" };
}
