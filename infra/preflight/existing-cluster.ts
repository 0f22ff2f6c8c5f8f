/**
 * `llm-ha preflight --online` for a stack on an existing cluster (`llm-ha:existingCluster`): what
 * llm-ha expects the operator's cluster to have, read before `pulumi up`. Each finding comes with
 * its fix. The reads go through `ClusterReader` (the `aws` CLI and `kubectl`, read-only), so tests
 * drive them with a fake.
 */
import { execFile } from "node:child_process";
import { eksSupportEndingSoon, eksVersionProblem, EKS_VERSIONS, isoDay } from "../../contracts/eks-versions";
import type { StackConfig } from "../config";
import { NODE_IDENTITY_MIN_VERSION } from "../config/cluster";
import { LABELS, GPU_TAINT } from "../names";
import type { CheckRow } from "./checks";

/** The existing cluster as preflight reads it. Every method is read-only. */
export interface ClusterReader {
  /** `aws eks describe-cluster`: its Kubernetes version. */
  clusterVersion(name: string): Promise<string>;
  /** `aws eks describe-nodegroup`: a managed node group's labels and taints (EKS's effect names: NO_SCHEDULE). */
  nodeGroup(cluster: string, name: string): Promise<{ labels: Record<string, string>; taints: { key: string; value?: string; effect: string }[] }>;
  /** `kubectl get --raw PATH`: the object or list; undefined when the API answers 404. */
  get(path: string): Promise<unknown>;
  /** `kubectl auth can-i VERB RESOURCE`: whether the running identity may. */
  canI(verb: string, resource: string, namespace?: string): Promise<boolean>;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const items = (v: unknown): Obj[] => (Array.isArray(obj(v).items) ? (obj(v).items as Obj[]) : []);
const labelsOf = (o: Obj): Record<string, string> => obj(obj(o.metadata).labels) as Record<string, string>;
const minor = (v: string) => Number(v.split(".")[1]);

/** The oldest Karpenter with the v1 API (`karpenter.sh/v1` NodePool, `karpenter.k8s.aws/v1` EC2NodeClass). */
export const KARPENTER_MIN_VERSION = "1.0.0";
/** The oldest Karpenter that selects capacity reservations (`capacityReservationSelectorTerms`, capacity type `reserved`). */
export const KARPENTER_RESERVATIONS_VERSION = "1.3.0";
/** The CRDs the Karpenter engine creates objects of, and the one the pods' security groups need. */
export const KARPENTER_CRDS = Object.freeze(["nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"]);
export const SECURITY_GROUP_POLICY_CRD = "securitygrouppolicies.vpcresources.k8s.aws";

/** `1.6.3` from an image reference (`…/karpenter/controller:1.6.3@sha256:…`), or undefined. */
export function imageVersion(image: string): string | undefined {
  return /:v?(\d+\.\d+\.\d+)(@|$)/.exec(image)?.[1];
}

function older(a: string, b: string): boolean {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] < pb[i];
  return false;
}

function images(workload: Obj): string[] {
  const containers = obj(obj(obj(obj(workload.spec).template).spec)).containers;
  return (Array.isArray(containers) ? containers : []).map((c) => String(obj(c).image ?? ""));
}

/** The rows for one existing cluster. Never throws: a failed read is a `fail` row naming it. */
export async function existingClusterRows(c: StackConfig, r: ClusterReader, today = new Date()): Promise<CheckRow[]> {
  const e = c.existingCluster;
  if (e === undefined) return [];
  const rows: CheckRow[] = [];
  const guard = async (check: string, f: () => Promise<CheckRow[]>) => {
    try {
      rows.push(...(await f()));
    } catch (err) {
      rows.push({ check, status: "fail", detail: `the read failed: ${err instanceof Error ? err.message : String(err)}`, fix: `aws eks update-kubeconfig --name ${e.name} --region ${c.region} (kubectl must reach the cluster as the identity that runs pulumi up)` });
    }
  };

  await guard("cluster version", async () => {
    const v = await r.clusterVersion(e.name);
    const newest = EKS_VERSIONS[EKS_VERSIONS.length - 1].version;
    const next = `1.${minor(v) + 1}`;
    const upgrade = `aws eks update-cluster-version --name ${e.name} --kubernetes-version ${next} (one minor version at a time, to ${newest})`;
    const out: CheckRow[] = [];
    const problem = eksVersionProblem(v, isoDay(today));
    const soon = eksSupportEndingSoon(v, isoDay(today));
    if (problem) out.push({ check: "cluster version", status: "fail", detail: `${e.name} runs Kubernetes ${v}: ${problem}`, fix: upgrade });
    else if (soon) out.push({ check: "cluster version", status: "warn", detail: `${e.name} runs Kubernetes ${v}: ${soon}`, fix: upgrade });
    else out.push({ check: "cluster version", status: "ok", detail: `${e.name} runs Kubernetes ${v}, in standard support`, fix: "" });
    if (c.nodeIdentities && minor(v) < minor(NODE_IDENTITY_MIN_VERSION)) {
      out.push({ check: "node identities", status: "invalid", detail: `node identities need Kubernetes ≥ ${NODE_IDENTITY_MIN_VERSION}; ${e.name} runs ${v}`, fix: `${upgrade}, or pulumi config set llm-ha:nodeIdentities false (docs/security.md)` });
    }
    return out;
  });

  await guard("load balancer controller", async () => {
    const found = items(await r.get("/apis/apps/v1/deployments?labelSelector=app.kubernetes.io%2Fname%3Daws-load-balancer-controller"));
    return [
      found.length > 0
        ? { check: "load balancer controller", status: "ok", detail: `running (${found.map((d) => `${String(obj(d.metadata).namespace)}/${String(obj(d.metadata).name)}`).join(", ")})`, fix: "" }
        : {
            check: "load balancer controller",
            status: "missing",
            detail: "no aws-load-balancer-controller Deployment: the L1 Services would never get their NLBs",
            fix: `helm install aws-load-balancer-controller eks/aws-load-balancer-controller -n kube-system --set clusterName=${e.name} (with its IAM role: docs/infra.md "Existing cluster")`,
          },
    ];
  });

  await guard("NVIDIA device plugin", async () => {
    const ds = items(await r.get("/apis/apps/v1/daemonsets"));
    const plugin = ds.filter((d) => /nvidia-device-plugin|gpu-operator/.test(String(obj(d.metadata).name)) || images(d).some((i) => i.includes("k8s-device-plugin")));
    if (plugin.length === 0) {
      return [{ check: "NVIDIA device plugin", status: "missing", detail: "no NVIDIA device plugin DaemonSet: GPU nodes would offer no nvidia.com/gpu and inference pods stay Pending", fix: `helm install nvdp nvdp/nvidia-device-plugin -n kube-system --set-json 'tolerations=[{"key":"${GPU_TAINT.key}","operator":"Exists","effect":"${GPU_TAINT.effect}"}]'` }];
    }
    const tolerates = plugin.some((d) => JSON.stringify(obj(obj(obj(d.spec).template).spec).tolerations ?? []).includes(GPU_TAINT.key) || JSON.stringify(obj(obj(obj(d.spec).template).spec).tolerations ?? []).includes('"operator":"Exists"'));
    return [
      tolerates
        ? { check: "NVIDIA device plugin", status: "ok", detail: `running (${plugin.map((d) => String(obj(d.metadata).name)).join(", ")})`, fix: "" }
        : { check: "NVIDIA device plugin", status: "invalid", detail: `${String(obj(plugin[0].metadata).name)} does not tolerate ${GPU_TAINT.key}:${GPU_TAINT.effect}: it would not run on llm-ha's GPU nodes`, fix: `add the toleration {key: ${GPU_TAINT.key}, operator: Exists, effect: ${GPU_TAINT.effect}} to its pod template` },
    ];
  });

  await guard("security groups for pods", async () => {
    const crd = await r.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${SECURITY_GROUP_POLICY_CRD}`);
    return [
      crd !== undefined
        ? { check: "security groups for pods", status: "ok", detail: `${SECURITY_GROUP_POLICY_CRD} is installed (the VPC CNI must run with ENABLE_POD_ENI=true)`, fix: "" }
        : { check: "security groups for pods", status: "missing", detail: `no ${SECURITY_GROUP_POLICY_CRD} CRD: the L1 and controller pods' security groups (Redis, MSK) cannot be given`, fix: "update the vpc-cni add-on and set ENABLE_POD_ENI=true (aws eks update-addon --addon-name vpc-cni --configuration-values '{\"env\":{\"ENABLE_POD_ENI\":\"true\"}}')" },
    ];
  });

  if (c.capacity.engine === "karpenter" && c.capacity.nodeClass === undefined && c.capacity.nodeRole === undefined) {
    // The node role the stack creates holds kubelet's and ECR's policies only (as the stack's own GPU role): the VPC CNI must bring its own.
    await guard("VPC CNI role", async () => {
      const sa = obj(await r.get("/api/v1/namespaces/kube-system/serviceaccounts/aws-node"));
      const role = obj(obj(sa.metadata).annotations)["eks.amazonaws.com/role-arn"];
      return [
        role !== undefined
          ? { check: "VPC CNI role", status: "ok", detail: `aws-node runs as ${String(role)} (IRSA): the GPU nodes' role needs no CNI policy`, fix: "" }
          : {
              check: "VPC CNI role",
              status: "warn",
              detail: "aws-node has no IRSA role annotation: if it uses the node's role (and no Pod Identity association), nodes on the role the stack creates could not assign pod IPs",
              fix: "give the vpc-cni add-on its own role (aws eks update-addon --addon-name vpc-cni --service-account-role-arn <role with AmazonEKS_CNI_Policy>), or set llm-ha:capacity.karpenter.nodeRole to a node role that has the CNI policy",
            },
      ];
    });
  }

  if (c.capacity.engine === "karpenter") {
    const cap = c.capacity;
    await guard("Karpenter", async () => {
      const out: CheckRow[] = [];
      for (const name of KARPENTER_CRDS) {
        const crd = obj(await r.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`));
        const versions = Array.isArray(obj(crd.spec).versions) ? (obj(crd.spec).versions as Obj[]) : [];
        if (Object.keys(crd).length === 0) out.push({ check: `Karpenter CRD ${name}`, status: "missing", detail: "not installed", fix: "helm upgrade --install karpenter-crd oci://public.ecr.aws/karpenter/karpenter-crd -n kube-system (Karpenter ≥ 1.0)" });
        else if (!versions.some((v) => v.name === "v1" && v.served === true)) out.push({ check: `Karpenter CRD ${name}`, status: "invalid", detail: "does not serve v1: Karpenter is older than 1.0", fix: "upgrade Karpenter to ≥ 1.0 (its v1 migration guide)" });
      }
      const deployments = items(await r.get("/apis/apps/v1/deployments?labelSelector=app.kubernetes.io%2Fname%3Dkarpenter"));
      const version = deployments.flatMap(images).map(imageVersion).find((v) => v !== undefined);
      const reservations = c.gpuClasses.some((g) => Object.keys(g.capacityReservations).length > 0);
      const need = reservations ? KARPENTER_RESERVATIONS_VERSION : KARPENTER_MIN_VERSION;
      if (deployments.length === 0) out.push({ check: "Karpenter version", status: "missing", detail: "no Karpenter Deployment (app.kubernetes.io/name=karpenter)", fix: `install Karpenter ≥ ${need} (karpenter.sh/docs/getting-started)` });
      else if (version === undefined) out.push({ check: "Karpenter version", status: "warn", detail: `cannot read a version from ${deployments.flatMap(images).join(", ")}`, fix: `make sure it is ≥ ${need}` });
      else if (older(version, need)) out.push({ check: "Karpenter version", status: "invalid", detail: `Karpenter ${version} is older than ${need}${reservations ? " (capacity reservations)" : " (the v1 API)"}`, fix: `upgrade Karpenter to ≥ ${need}${reservations ? " and enable its ReservedCapacity feature gate" : ""}` });
      else out.push({ check: "Karpenter version", status: "ok", detail: `Karpenter ${version}${reservations ? "; capacity reservations need its ReservedCapacity feature gate" : ""}`, fix: "" });
      if (cap.nodeClass !== undefined && (await r.get(`/apis/karpenter.k8s.aws/v1/ec2nodeclasses/${cap.nodeClass}`)) === undefined) {
        out.push({ check: "EC2NodeClass", status: "missing", detail: `llm-ha:capacity.karpenter.nodeClass ${cap.nodeClass} does not exist`, fix: "kubectl get ec2nodeclasses, and name one (or leave nodeClass out: the stack creates one per GPU class)" });
      }
      return out;
    });
  }

  if (c.capacity.engine === "nodeGroups") {
    const cap = c.capacity;
    for (const az of c.azs) {
      for (const g of c.gpuClasses) {
        const entries: [string | undefined, boolean][] = [[cap.groups[az]?.[g.name], false], [az === c.standbyAz ? cap.fallback[g.name] : undefined, true]];
        for (const [name, fallback] of entries) {
          if (name === undefined) continue;
          await guard(`node group ${name}`, async () => {
            const ng = await r.nodeGroup(e.name, name);
            const want: Record<string, string> = { [LABELS.gpuClass]: g.name, [LABELS.az]: az, [LABELS.azRole]: az === c.standbyAz ? "standby" : "active", ...(fallback ? { "llm-ha.io/standby-fallback": "true" } : {}) };
            const wrong = Object.entries(want).filter(([k, v]) => ng.labels[k] !== v);
            const tainted = ng.taints.some((t) => t.key === GPU_TAINT.key && t.effect === "NO_SCHEDULE");
            if (wrong.length === 0 && tainted) return [{ check: `node group ${name}`, status: "ok", detail: `labelled for ${g.name} in ${az}, tainted ${GPU_TAINT.key}`, fix: "" }];
            const labels = Object.entries(want).map(([k, v]) => `${k}=${v}`).join(",");
            return [{
              check: `node group ${name}`,
              status: "invalid",
              detail: [wrong.length ? `labels ${wrong.map(([k, v]) => `${k}=${v}`).join(", ")} missing or different` : "", tainted ? "" : `no ${GPU_TAINT.key}=true:NoSchedule taint`].filter(Boolean).join("; "),
              fix: `aws eks update-nodegroup-config --cluster-name ${e.name} --nodegroup-name ${name} --labels 'addOrUpdateLabels={${labels}}' --taints 'addOrUpdateTaints=[{key=${GPU_TAINT.key},value=${GPU_TAINT.value},effect=NO_SCHEDULE}]'`,
            }];
          });
        }
      }
    }
  }

  await guard("system nodes", async () => {
    const nodes = items(await r.get("/api/v1/nodes?labelSelector=llm-ha.io%2Fnode-role%3Dsystem"));
    const zones = new Set(nodes.map((n) => labelsOf(n)[LABELS.zone]));
    const without = c.azs.filter((az) => !zones.has(az));
    return [
      without.length === 0
        ? { check: "system nodes", status: "ok", detail: `nodes labelled llm-ha.io/node-role=system in ${c.azs.join(", ")}`, fix: "" }
        : { check: "system nodes", status: "missing", detail: `no node labelled llm-ha.io/node-role=system in ${without.join(", ")}: the controller and that AZ's L1 proxies would stay Pending`, fix: "label a node group per AZ: aws eks update-nodegroup-config --cluster-name " + e.name + " --nodegroup-name <group> --labels 'addOrUpdateLabels={llm-ha.io/node-role=system}'" },
    ];
  });

  await guard("access", async () => {
    const wants: [string, string, string?][] = [
      ["create", "namespaces"],
      ["create", "clusterroles.rbac.authorization.k8s.io"],
      ["create", "clusterrolebindings.rbac.authorization.k8s.io"],
      ["create", "priorityclasses.scheduling.k8s.io"],
      ["create", "deployments.apps", "llm-ha"],
      ...(c.capacity.engine === "karpenter" ? ([["create", "nodepools.karpenter.sh"], ["create", "ec2nodeclasses.karpenter.k8s.aws"]] as [string, string][]) : []),
    ];
    const denied: string[] = [];
    for (const [verb, resource, ns] of wants) if (!(await r.canI(verb, resource, ns))) denied.push(`${verb} ${resource}${ns ? ` in ${ns}` : ""}`);
    return [
      denied.length === 0
        ? { check: "access", status: "ok", detail: "the running identity may create what the stack applies", fix: "" }
        : {
            check: "access",
            status: "missing",
            detail: `the running identity may not ${denied.join(", ")}`,
            fix: `aws eks create-access-entry --cluster-name ${e.name} --principal-arn <your role ARN> && aws eks associate-access-policy --cluster-name ${e.name} --principal-arn <your role ARN> --policy-arn arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy --access-scope type=cluster`,
          },
    ];
  });
  return rows;
}

/** The real reader: the `aws` CLI and `kubectl` on the current kubeconfig context, read-only. */
export function cliClusterReader(region: string, timeoutMs = 30_000): ClusterReader {
  const run = (cmd: string, args: string[]): Promise<{ ok: boolean; out: string; err: string }> =>
    new Promise((resolve) => {
      execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 32 << 20 }, (error, stdout, stderr) => resolve({ ok: !error, out: stdout, err: stderr }));
    });
  const json = async (cmd: string, args: string[]): Promise<unknown> => {
    const r = await run(cmd, args);
    if (!r.ok) throw new Error(`${cmd} ${args.slice(0, 2).join(" ")}: ${r.err.trim().split("\n").pop() ?? ""}`);
    return JSON.parse(r.out || "{}");
  };
  return {
    async clusterVersion(name) {
      return String(obj(obj(await json("aws", ["eks", "describe-cluster", "--name", name, "--region", region, "--output", "json"])).cluster).version);
    },
    async nodeGroup(cluster, name) {
      const ng = obj(obj(await json("aws", ["eks", "describe-nodegroup", "--cluster-name", cluster, "--nodegroup-name", name, "--region", region, "--output", "json"])).nodegroup);
      return { labels: obj(ng.labels) as Record<string, string>, taints: (Array.isArray(ng.taints) ? ng.taints : []) as { key: string; value?: string; effect: string }[] };
    },
    async get(path) {
      const r = await run("kubectl", ["get", "--raw", path]);
      if (!r.ok && /NotFound|\(404\)|not found/i.test(r.err)) return undefined;
      if (!r.ok) throw new Error(`kubectl get --raw ${path}: ${r.err.trim().split("\n").pop() ?? ""}`);
      return JSON.parse(r.out || "{}");
    },
    async canI(verb, resource, namespace) {
      const r = await run("kubectl", ["auth", "can-i", verb, resource, ...(namespace ? ["-n", namespace] : [])]);
      return r.out.trim() === "yes";
    },
  };
}
