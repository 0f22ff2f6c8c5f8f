// Who holds the cloud: the actuator's IAM role (tagged `llm-ha.io/identity: agent`)
// may be assumed only by the controller's ServiceAccount. A pod on a GPU node (it tolerates the
// `nvidia.com/gpu` taint) whose ServiceAccount the role trusts puts the cloud on every GPU node:
// root on one of them could shift every zone away and resize the standby groups.
import { type StackValidationPolicy } from "@pulumi/policy";
import { AGENT_ROLE_TAG } from "./iam";
import { list, record, str, stringMap, strings, type Props } from "./props";

const ROLE_TYPE = "aws:iam/role:Role";
const GPU_TAINT_KEY = "nvidia.com/gpu";
const POD_TEMPLATE_KINDS = new Set(["DaemonSet", "Deployment", "StatefulSet", "Job"]);

/** `:sub` values a web-identity trust statement names (StringEquals exact, StringLike globs); null when a statement names none (any ServiceAccount). */
function trustedSubjects(assumeRolePolicy: unknown): { exact: string[]; globs: string[] } | null {
  let doc: unknown = assumeRolePolicy;
  if (typeof doc === "string") {
    try {
      doc = JSON.parse(doc);
    } catch {
      return { exact: [], globs: [] };
    }
  }
  const raw = record(doc)?.Statement;
  const exact: string[] = [];
  const globs: string[] = [];
  for (const s of (Array.isArray(raw) ? raw : [raw]).map(record)) {
    if (!s || s.Effect !== "Allow" || !JSON.stringify(s.Action ?? "").includes("AssumeRoleWithWebIdentity")) continue;
    const cond = record(s.Condition) ?? {};
    const pick = (op: string): string[] =>
      Object.entries(record(cond[op]) ?? {})
        .filter(([k]) => k.endsWith(":sub"))
        .flatMap(([, v]) => (typeof v === "string" ? [v] : strings(v)));
    const eq = pick("StringEquals");
    const like = pick("StringLike");
    if (eq.length === 0 && like.length === 0) return null;
    exact.push(...eq);
    globs.push(...like);
  }
  return { exact, globs };
}

const globMatch = (glob: string, s: string): boolean => new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`).test(s);

export const gpuAgentsHoldNoCloudRole: StackValidationPolicy = {
  name: "gpu-agents-hold-no-cloud-role",
  description:
    "The actuator's IAM role trusts only the controller's ServiceAccount: no pod on a GPU node (tolerating nvidia.com/gpu) runs as a ServiceAccount it trusts, and its trust names ServiceAccounts (L2 cluster and L3 zone tiers: one compromised GPU node must not hold zonal shifts and standby resizes).",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    const roles = args.resources.filter((r) => r.type === ROLE_TYPE && stringMap((r.props as Props).tags)[AGENT_ROLE_TAG.key] === AGENT_ROLE_TAG.value);
    for (const role of roles) {
      const trusted = trustedSubjects((role.props as Props).assumeRolePolicy);
      if (trusted === null) {
        reportViolation(`The actuator's role ${role.name} trusts web identities without a :sub condition: every ServiceAccount in the cluster, GPU-node agents included, could assume it; name the controller's ServiceAccount.`, role.urn);
        continue;
      }
      for (const r of args.resources) {
        const p = r.props as Props;
        if (!r.type.startsWith("kubernetes:") || !POD_TEMPLATE_KINDS.has(str(p.kind) ?? "")) continue;
        const pod = record(record(record(p.spec)?.template)?.spec) ?? {};
        const onGpu = list(pod.tolerations).some((t) => str(record(t)?.key) === GPU_TAINT_KEY);
        if (!onGpu) continue;
        const ns = str(record(p.metadata)?.namespace) ?? "default";
        const sa = str(pod.serviceAccountName) ?? str(pod.serviceAccount) ?? "default";
        const subject = `system:serviceaccount:${ns}:${sa}`;
        if (trusted.exact.includes(subject) || trusted.globs.some((g) => globMatch(g, subject))) {
          reportViolation(
            `${p.kind} ${str(record(p.metadata)?.name) ?? r.name} runs on GPU nodes as ServiceAccount ${ns}/${sa}, which the actuator's role ${role.name} trusts: GPU-node agents must hold no cloud role; trust the controller's ServiceAccount only.`,
            r.urn,
          );
        }
      }
    }
  },
};
