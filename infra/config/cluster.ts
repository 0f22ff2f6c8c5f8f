import * as pulumi from "@pulumi/pulumi";
import { DEFAULT_EKS_VERSION, EKS_VERSIONS, eksSupportEndingSoon, eksVersionProblem, isoDay } from "../../contracts/eks-versions";
import { ADDON_NAMES, type AddonName } from "../addons";
import { isObj, type Settings } from "./read";
import type { StackConfig } from "./stack-config";
import { Problems } from "../problems";

/** How `pulumi up` reaches the cluster's API (`llm-ha:apiEndpoint`). */
export type ApiEndpointConfig =
  /** Public endpoint open to these CIDRs only (the machine running `pulumi up` must be in one), plus the private one. */
  | { access: "public"; publicAccessCidrs: string[] }
  /** Private endpoint only; `pulumi up` runs inside the VPC or a network routed to it (`runnerCidrs` may reach :443). */
  | { access: "private"; runnerCidrs: string[] };

/** A CIDR a public API endpoint may be open to: IPv4, prefix /8 or longer (never 0.0.0.0/0). */
function cidrProblem(c: unknown): string | undefined {
  const m = typeof c === "string" ? /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(c) : null;
  if (!m || m.slice(1, 5).some((o) => Number(o) > 255) || Number(m[5]) > 32) return `${JSON.stringify(c)} is not an IPv4 CIDR`;
  if (Number(m[5]) < 8) return `${c} opens the Kubernetes API to the internet; list the networks pulumi up and kubectl run from`;
  return undefined;
}

/** `llm-ha:apiEndpoint`: required, because how `pulumi up` reaches the API is the user's choice. */
function apiEndpointOf(v: unknown, k: string, p: Problems): ApiEndpointConfig {
  const choice =
    `choose access: public with publicAccessCidrs: [<the CIDRs pulumi up and kubectl run from>] ` +
    `(the API answers only those; nodes use the private endpoint), or access: private with runnerCidrs: [<CIDRs of an in-VPC or VPN-routed runner>] ` +
    `(pulumi up must then run inside the VPC: docs/infra.md "Private API endpoint")`;
  if (v === undefined) {
    p.add(k, `is required: ${choice}`);
    return { access: "public", publicAccessCidrs: [] };
  }
  if (!isObj(v) || (v.access !== "public" && v.access !== "private")) {
    p.add(`${k}.access`, `must be "public" or "private": ${choice}`);
    return { access: "public", publicAccessCidrs: [] };
  }
  const listKey = v.access === "public" ? "publicAccessCidrs" : "runnerCidrs";
  const other = v.access === "public" ? "runnerCidrs" : "publicAccessCidrs";
  if (v[other] !== undefined) p.add(`${k}.${other}`, `does not apply to access: ${v.access}`);
  const cidrs = v[listKey];
  if (!Array.isArray(cidrs) || cidrs.length === 0) {
    p.add(`${k}.${listKey}`, `is required with access: ${v.access} (a non-empty list of CIDRs; 0.0.0.0/0 is refused)`);
    return v.access === "public" ? { access: "public", publicAccessCidrs: [] } : { access: "private", runnerCidrs: [] };
  }
  for (const c of cidrs) {
    const why = cidrProblem(c);
    if (why) p.add(`${k}.${listKey}`, why);
  }
  const ok = cidrs.filter((c): c is string => cidrProblem(c) === undefined);
  return v.access === "public" ? { access: "public", publicAccessCidrs: ok } : { access: "private", runnerCidrs: ok };
}

/**
 * What to say about a Kubernetes version on `day`. Refused: not a version, or one EKS never
 * had or has not released. Only warned (the stack still runs, so it can be upgraded or
 * destroyed): a version past its standard support (the day moves on under a stack that was
 * fine yesterday; the policy pack's eks-version-supported still refuses it in CI), and one
 * newer than the table (contracts/eks-versions.ts), whose window is then not checked here.
 */
export function kubernetesVersionCheck(version: string, day: string): { refuse: boolean; message: string } | undefined {
  const newest = EKS_VERSIONS[EKS_VERSIONS.length - 1].version;
  const minor = (v: string) => Number(v.split(".")[1]);
  if (!/^1\.\d+$/.test(version)) return { refuse: true, message: `${JSON.stringify(version)} is not a Kubernetes minor version (1.35)` };
  const row = EKS_VERSIONS.find((v) => v.version === version);
  if (row === undefined && minor(version) > minor(newest)) {
    return { refuse: false, message: `EKS version ${version} is newer than the support table (contracts/eks-versions.ts, newest ${newest}): its support window is not checked (aws eks describe-cluster-versions); add its row` };
  }
  const problem = eksVersionProblem(version, day);
  // Within EKS_SUPPORT_WARNING_DAYS of the end of standard support: warned (preflight too), time to upgrade.
  if (problem === undefined) {
    const soon = eksSupportEndingSoon(version, day);
    return soon === undefined ? undefined : { refuse: false, message: soon };
  }
  return { refuse: row === undefined || day < row.released, message: problem };
}

/** `llm-ha:apiEndpoint`, `addonVersions` and `kubernetesVersion`: the EKS control plane. */
export function clusterOf(s: Settings, today: Date, warn: (message: string) => void, existing = false): Pick<StackConfig, "apiEndpoint" | "addonVersions" | "kubernetesVersion"> {
  const { cfg, p, key } = s;
  // An existing cluster's endpoint is the operator's (infra/config/existing-cluster.ts refuses the key there).
  const apiEndpoint: ApiEndpointConfig = existing ? { access: "private", runnerCidrs: [] } : apiEndpointOf(cfg.getObject<unknown>("apiEndpoint"), key("apiEndpoint"), p);
  if (cfg.get("privateEndpointOnly") !== undefined) {
    p.add(key("privateEndpointOnly"), `is replaced by ${key("apiEndpoint")} (access: public with publicAccessCidrs, or access: private with runnerCidrs)`);
  }

  const addonVersions: Partial<Record<AddonName, string>> = {};
  for (const [name, v] of Object.entries(s.obj("addonVersions"))) {
    if (!(ADDON_NAMES as readonly string[]).includes(name)) p.add(key(`addonVersions.${name}`), `unknown add-on; known: ${ADDON_NAMES.join(", ")}`);
    else if (typeof v !== "string" || !/^v\d+\.\d+\.\d+-eksbuild\.\d+$/.test(v)) p.add(key(`addonVersions.${name}`), "must look like v1.2.3-eksbuild.1");
    else addonVersions[name as AddonName] = v;
  }

  const kubernetesVersion = cfg.get("kubernetesVersion") ?? DEFAULT_EKS_VERSION;
  const why = kubernetesVersionCheck(kubernetesVersion, isoDay(today));
  if (why?.refuse) p.add(key("kubernetesVersion"), why.message);
  else if (why) warn(`${key("kubernetesVersion")}: ${why.message}`);
  return { apiEndpoint, addonVersions, kubernetesVersion };
}

/** The first Kubernetes minor version whose projected ServiceAccount tokens name the node (`kubernetes.io.node.name`). */
export const NODE_IDENTITY_MIN_VERSION = "1.30";

/**
 * `llm-ha:nodeIdentities` (default true): each GPU node's agent enrols with a projected token that
 * names its node, and heartbeats under a record key only it and the leader know (docs/security.md
 * "What one GPU node can do"). `false` is the way out for a cluster that cannot have them: the
 * agent DaemonSet then carries no token and says so in an annotation (the policy
 * agent-node-identity lets it through only with that). Refused with a Kubernetes version that
 * puts no node in the tokens.
 */
export function nodeIdentitiesOf(s: Settings, kubernetesVersion: string): boolean {
  const { cfg, p, key } = s;
  const raw = cfg.get("nodeIdentities");
  if (raw !== undefined && raw !== "true" && raw !== "false") {
    p.add(key("nodeIdentities"), `must be true or false, got ${JSON.stringify(raw)}`);
    return true;
  }
  const on = raw !== "false";
  const minor = (v: string) => Number(v.split(".")[1]);
  if (on && /^1\.\d+$/.test(kubernetesVersion) && minor(kubernetesVersion) < minor(NODE_IDENTITY_MIN_VERSION)) {
    p.add(
      key("nodeIdentities"),
      `node identities need Kubernetes ≥ ${NODE_IDENTITY_MIN_VERSION} (its projected tokens name the node) and ${key("kubernetesVersion")} is ${kubernetesVersion}: upgrade the cluster, or set ${key("nodeIdentities")} false, which lets one GPU node's Redis credential write every node's record (docs/security.md)`,
    );
  }
  return on;
}

const PRINCIPAL_ARN = /^arn:aws[a-z-]*:iam::\d{12}:(role|user)\/[\w+=,.@/-]+$/;

/**
 * `llm-ha:clusterAdmins`, `llm-ha:kubeconfigRoleArn` and `aws:profile`: the principals
 * besides the creator that get an access entry, and the identity the kubeconfig uses.
 */
export function clusterAccessOf(s: Settings, aws: pulumi.Config): StackConfig["clusterAccess"] {
  const { cfg, p, key } = s;
  const raw = cfg.getObject<unknown>("clusterAdmins") ?? [];
  const admins: string[] = [];
  if (!Array.isArray(raw)) p.add(key("clusterAdmins"), "must be a list of IAM role or user ARNs (arn:aws:iam::<account>:role/<name>)");
  else {
    raw.forEach((a, i) => {
      if (typeof a !== "string" || !PRINCIPAL_ARN.test(a)) {
        p.add(key(`clusterAdmins[${i}]`), `${JSON.stringify(a)} is not an IAM role or user ARN; for an assumed-role session give its role (arn:aws:iam::<account>:role/<name>, not arn:aws:sts::…:assumed-role/…)`);
      } else if (admins.includes(a)) p.add(key(`clusterAdmins[${i}]`), `${a} is listed twice`);
      else admins.push(a);
    });
  }
  const kubeconfigRoleArn = cfg.get("kubeconfigRoleArn");
  if (kubeconfigRoleArn !== undefined && !/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/.test(kubeconfigRoleArn)) {
    p.add(key("kubeconfigRoleArn"), `${kubeconfigRoleArn} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)`);
  }
  const awsProfile = aws.get("profile");
  return { admins, kubeconfigRoleArn: kubeconfigRoleArn && PRINCIPAL_ARN.test(kubeconfigRoleArn) ? kubeconfigRoleArn : undefined, awsProfile: awsProfile || undefined };
}

/** `llm-ha:systemNodes`: the on-demand group for the controllers and the L1 proxies. */
export function systemNodesOf(s: Settings, azs: string[]): StackConfig["system"] {
  const sys = s.obj("systemNodes");
  const system = {
    instanceType: s.str(sys, "instanceType", s.key("systemNodes.instanceType"), "m6i.large"),
    desiredSize: s.int(sys, "desiredSize", s.key("systemNodes.desiredSize"), azs.length),
    maxSize: s.int(sys, "maxSize", s.key("systemNodes.maxSize"), azs.length * 2),
  };
  if (system.maxSize < system.desiredSize) s.p.add(s.key("systemNodes.maxSize"), "must be ≥ desiredSize");
  return system;
}

/**
 * Each AZ's system node group: the stack's totals (`llm-ha:systemNodes`) split evenly over the
 * AZs, rounded up, at least one node each (the L1 pods are zone-pinned). So the nodes that can
 * run are `perAz.max × azs`, which the Standard quota check counts.
 */
export function systemGroupSize(total: { desired: number; max: number }, azs: number): { desired: number; max: number } {
  return { desired: Math.max(1, Math.ceil(total.desired / azs)), max: Math.max(1, Math.ceil(total.max / azs)) };
}

