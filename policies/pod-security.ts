// A pod with the host's network, PIDs or files, or with privilege, is worth the node: only
// the namespaces whose Pod Security Admission level is `privileged` on purpose may run one,
// and no pod runs `privileged` at all (the XID relay needs CAP_SYSLOG alone). Every namespace
// the stack creates says its Pod Security Admission level, and every one but those host
// namespaces enforces `restricted` (the L1 tier and the controller need nothing from the host).
import type { ResourceValidationPolicy } from "@pulumi/policy";
import { podSpecOf, WORKLOAD_TYPES } from "./edge";
import { NAMESPACE_TYPE, PSA_ENFORCE as ENFORCE } from "./pod-standards";
import { joinWords, list, record, str, stringMap, type Props } from "./props";

export interface PodSecurityConfig {
  /** Namespaces allowed to run pods with host access (host network/PID/IPC, hostPath, added capabilities). */
  hostNamespaces: string[];
  /** Capabilities a container may add outside those namespaces (Pod Security `baseline` allows none we need). */
  allowedCapabilities: string[];
}

const LEVELS = ["privileged", "baseline", "restricted"];

/** What in a pod spec reaches past its own sandbox, as words for a message. */
export function hostAccess(spec: Props, allowedCapabilities: readonly string[]): string[] {
  const found: string[] = [];
  for (const key of ["hostNetwork", "hostPID", "hostIPC"]) if (spec[key] === true) found.push(key);
  for (const v of list(spec.volumes).map((x) => record(x) ?? {})) if (record(v.hostPath)) found.push(`hostPath volume ${str(v.name) ?? "?"}`);
  for (const c of [...list(spec.initContainers), ...list(spec.containers)].map((x) => record(x) ?? {})) {
    const added = list(record(record(c.securityContext)?.capabilities)?.add).map(String).filter((cap) => !allowedCapabilities.includes(cap));
    if (added.length > 0) found.push(`container ${str(c.name) ?? "?"} adds ${added.join(", ")}`);
  }
  return found;
}

function privileged(spec: Props): string[] {
  return [...list(spec.initContainers), ...list(spec.containers)]
    .map((x) => record(x) ?? {})
    .filter((c) => record(c.securityContext)?.privileged === true)
    .map((c) => str(c.name) ?? "?");
}

export const podSecurity: ResourceValidationPolicy = {
  name: "pod-security",
  description:
    "L1–L3 run on these pods: no container runs privileged; pods with host access (host network, PID or IPC, hostPath volumes, added capabilities) run only in the namespaces allowed to have them " +
    "(the workloads namespace: agents and vLLM on the host network; kube-system: the device plugin); every Namespace the stack creates carries a Pod Security Admission enforce level, " +
    "`restricted` for every one but those (the edge namespace of the L1 proxies and the controller).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      hostNamespaces: { type: "array", items: { type: "string" }, default: ["llm-ha", "kube-system"] },
      allowedCapabilities: { type: "array", items: { type: "string" }, default: ["NET_BIND_SERVICE"] },
    },
  },
  validateResource: (args, reportViolation) => {
    const props = args.props as Props;
    if (args.type === NAMESPACE_TYPE) {
      const name = str(record(props.metadata)?.name) ?? args.name;
      const level = stringMap(record(props.metadata)?.labels)[ENFORCE];
      if (!level || !LEVELS.includes(level)) reportViolation(`Namespace ${name} has no ${ENFORCE} label (privileged, baseline or restricted).`);
      else if (level !== "restricted" && !args.getConfig<PodSecurityConfig>().hostNamespaces.includes(name)) {
        reportViolation(`Namespace ${name} enforces ${level}: only ${joinWords(args.getConfig<PodSecurityConfig>().hostNamespaces)} may enforce less than restricted (their pods need the host); enforce restricted.`);
      }
      return;
    }
    if (!WORKLOAD_TYPES.includes(args.type)) args.notApplicable(`Policy only applies to ${[NAMESPACE_TYPE, ...WORKLOAD_TYPES].join(", ")}`);
    const spec = podSpecOf(args.type, props);
    if (!spec) return;
    const name = str(record(props.metadata)?.name) ?? args.name;
    const ns = str(record(props.metadata)?.namespace) ?? "default";
    const priv = privileged(spec);
    if (priv.length > 0) reportViolation(`${name}: container ${joinWords(priv)} runs privileged; grant the one capability it needs instead.`);
    const { hostNamespaces, allowedCapabilities } = args.getConfig<PodSecurityConfig>();
    const access = hostAccess(spec, allowedCapabilities);
    if (access.length > 0 && !hostNamespaces.includes(ns)) {
      reportViolation(`${name} in namespace ${ns} has host access (${access.join("; ")}); only ${joinWords(hostNamespaces)} may run such pods.`);
    }
  },
};
