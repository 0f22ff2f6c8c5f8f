// Node identities: the agent role's Redis credential is shared by every GPU node, so Redis ACLs
// alone let one node write every node's record. The agent DaemonSet binds records to nodes by
// enrolling with a projected ServiceAccount token (audience `llm-ha`) that names its node; a
// DaemonSet without one is refused unless the stack turned identities off on purpose
// (`llm-ha:nodeIdentities: false`, which annotates the DaemonSet).
import * as k8s from "@pulumi/kubernetes";
import { validateResourceOfType, type ResourceValidationPolicy } from "@pulumi/policy";
import { NODE_IDENTITY } from "../contracts/names";
import { nameOf } from "./conventions";
import { list, record, str, stringMap, type Props } from "./props";

export interface NodeIdentityConfig {
  agentLabelKey: string;
  agentLabelValue: string;
  audience: string;
}

/** `<mountPath>/<path>` of each token of `audience` the container mounts. */
function tokenFiles(pod: Props, container: Props, audience: string): string[] {
  const tokens = new Map<string, string[]>();
  for (const v of list(pod.volumes).map(record)) {
    const name = str(v?.name);
    if (!name) continue;
    const paths = list(record(v?.projected)?.sources)
      .map((src) => record(record(src)?.serviceAccountToken))
      .filter((t) => t !== undefined && str(t.audience) === audience)
      .map((t) => str(t!.path) ?? "");
    if (paths.length) tokens.set(name, paths);
  }
  return list(container.volumeMounts)
    .map(record)
    .flatMap((m) => (m && tokens.has(str(m.name) ?? "") ? tokens.get(str(m.name)!)!.map((p) => `${(str(m.mountPath) ?? "").replace(/\/+$/, "")}/${p}`) : []));
}

export const agentNodeIdentity: ResourceValidationPolicy = {
  name: "agent-node-identity",
  description:
    "The llm-ha agent DaemonSet mounts a projected ServiceAccount token of audience llm-ha into a container whose LLMHA_IDENTITY_TOKEN_FILE names it (node identities: each GPU node heartbeats under a record key only it and the leader know), unless the stack opted out explicitly (llm-ha:nodeIdentities false, annotation llm-ha.io/node-identities: off) (L1 node tier: one GPU node's Redis credential cannot forge another node's record).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      agentLabelKey: { type: "string", default: "app.kubernetes.io/name", description: "Pod label key that marks the agent." },
      agentLabelValue: { type: "string", default: "llm-ha-agent", description: "Value of that label on agent pods." },
      audience: { type: "string", default: NODE_IDENTITY.audience, description: "Audience of the identity token the leader accepts." },
    },
  },
  validateResource: validateResourceOfType(k8s.apps.v1.DaemonSet, (_ds, args, reportViolation) => {
    const cfg = args.getConfig<NodeIdentityConfig>();
    const props = args.props as Props;
    const template = record(record(props.spec)?.template);
    if (stringMap(record(template?.metadata)?.labels)[cfg.agentLabelKey] !== cfg.agentLabelValue) return;
    if (stringMap(record(props.metadata)?.annotations)[NODE_IDENTITY.optOutAnnotation] === NODE_IDENTITY.optOut) return;
    const pod = record(template?.spec) ?? {};
    const enrols = list(pod.containers)
      .map(record)
      .some((c) => {
        if (!c) return false;
        const file = list(c.env).map(record).find((e) => str(e?.name) === "LLMHA_IDENTITY_TOKEN_FILE");
        return file !== undefined && tokenFiles(pod, c, cfg.audience).includes(str(file.value) ?? "");
      });
    if (enrols) return;
    reportViolation(
      `Agent DaemonSet ${nameOf(props, args.name)} has no projected ServiceAccount token of audience ${cfg.audience} named by LLMHA_IDENTITY_TOKEN_FILE: without node identities one GPU node's Redis credential writes every node's record. ` +
        `Turn them on (llm-ha:nodeIdentities, the default; Kubernetes ≥ 1.30), or opt out explicitly with llm-ha:nodeIdentities false (the stack then annotates the DaemonSet ${NODE_IDENTITY.optOutAnnotation}: ${NODE_IDENTITY.optOut}).`,
    );
  }),
};
