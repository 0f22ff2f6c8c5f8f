// Pod Security Admission refuses a pod at `kubectl apply` time, in the middle of `pulumi up`:
// one that asks for more than its namespace's level stops the rollout half done (an L1 tier
// without its new pods, a controller without its replicas). This checks each workload of the
// stack against the Pod Security Standard its namespace enforces, before anything is applied.
// The checks follow the Kubernetes Pod Security Standards (baseline, then restricted on top).
import type { StackValidationPolicy } from "@pulumi/policy";
import { namespaceOf, nameOf } from "./conventions";
import { podSpecOf, WORKLOAD_TYPES } from "./edge";
import { list, num, record, str, stringMap, strings, type Props } from "./props";

export const NAMESPACE_TYPE = "kubernetes:core/v1:Namespace";
export const PSA_ENFORCE = "pod-security.kubernetes.io/enforce";
export type PodStandard = "baseline" | "restricted";

/** Capabilities `baseline` lets a container add; `restricted` allows only NET_BIND_SERVICE. */
const BASELINE_CAPABILITIES = ["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"];
const SAFE_SYSCTLS = ["kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"];
const SELINUX_TYPES = ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];
/** Volume types `restricted` admits. */
const RESTRICTED_VOLUMES = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];

/** Every container of the pod (init and ephemeral ones too), each with its name. */
function containersOf(spec: Props): { name: string; c: Props; sc: Props }[] {
  return [...list(spec.initContainers), ...list(spec.containers), ...list(spec.ephemeralContainers)]
    .map((x) => record(x) ?? {})
    .map((c) => ({ name: str(c.name) ?? "?", c, sc: record(c.securityContext) ?? {} }));
}

function baseline(spec: Props, pod: Props, cs: ReturnType<typeof containersOf>): string[] {
  const found: string[] = [];
  for (const key of ["hostNetwork", "hostPID", "hostIPC"]) if (spec[key] === true) found.push(`${key} is set`);
  if (record(pod.windowsOptions)?.hostProcess === true) found.push("hostProcess is set");
  for (const v of list(spec.volumes).map((x) => record(x) ?? {})) if (record(v.hostPath)) found.push(`volume ${str(v.name) ?? "?"} is a hostPath`);
  const seccompUnconfined = (sc: Props) => str(record(sc.seccompProfile)?.type) === "Unconfined";
  const selinuxBad = (sc: Props) => {
    const o = record(sc.seLinuxOptions);
    return o !== undefined && (!SELINUX_TYPES.includes(str(o.type) ?? "") || str(o.user) !== undefined || str(o.role) !== undefined);
  };
  if (seccompUnconfined(pod)) found.push("the pod's seccomp profile is Unconfined");
  if (selinuxBad(pod)) found.push("the pod sets a custom SELinux type, user or role");
  if (str(record(pod.appArmorProfile)?.type) === "Unconfined") found.push("the pod's AppArmor profile is Unconfined");
  const sysctls = list(pod.sysctls).map((s) => str(record(s)?.name) ?? "?").filter((n) => !SAFE_SYSCTLS.includes(n));
  if (sysctls.length > 0) found.push(`the pod sets unsafe sysctls ${sysctls.join(", ")}`);
  for (const { name, c, sc } of cs) {
    if (sc.privileged === true) found.push(`container ${name} is privileged`);
    if (record(sc.windowsOptions)?.hostProcess === true) found.push(`container ${name} is a hostProcess`);
    const added = strings(record(sc.capabilities)?.add).filter((cap) => !BASELINE_CAPABILITIES.includes(cap));
    if (added.length > 0) found.push(`container ${name} adds ${added.join(", ")}`);
    const hostPorts = list(c.ports).map((p) => num(record(p)?.hostPort) ?? 0).filter((p) => p !== 0);
    if (hostPorts.length > 0) found.push(`container ${name} binds host port ${hostPorts.join(", ")}`);
    if (seccompUnconfined(sc)) found.push(`container ${name}'s seccomp profile is Unconfined`);
    if (selinuxBad(sc)) found.push(`container ${name} sets a custom SELinux type, user or role`);
    if (str(record(sc.appArmorProfile)?.type) === "Unconfined") found.push(`container ${name}'s AppArmor profile is Unconfined`);
    if ((str(sc.procMount) ?? "Default") !== "Default") found.push(`container ${name} sets procMount ${str(sc.procMount)}`);
  }
  return found;
}

function restricted(spec: Props, pod: Props, cs: ReturnType<typeof containersOf>): string[] {
  const found: string[] = [];
  for (const v of list(spec.volumes).map((x) => record(x) ?? {})) {
    const kind = Object.keys(v).find((k) => k !== "name");
    if (kind !== undefined && kind !== "hostPath" && !RESTRICTED_VOLUMES.includes(kind)) found.push(`volume ${str(v.name) ?? "?"} is of type ${kind}`);
  }
  if (num(pod.runAsUser) === 0) found.push("the pod runs as UID 0");
  const seccompOk = (sc: Props) => ["RuntimeDefault", "Localhost"].includes(str(record(sc.seccompProfile)?.type) ?? "");
  for (const { name, sc } of cs) {
    if (sc.allowPrivilegeEscalation !== false) found.push(`container ${name} does not set allowPrivilegeEscalation: false`);
    if (sc.runAsNonRoot === false || (sc.runAsNonRoot !== true && pod.runAsNonRoot !== true)) found.push(`container ${name} does not run as non-root (runAsNonRoot: true)`);
    if (num(sc.runAsUser) === 0) found.push(`container ${name} runs as UID 0`);
    if (!seccompOk(sc) && !(sc.seccompProfile === undefined && seccompOk(pod))) found.push(`container ${name} has no RuntimeDefault or Localhost seccomp profile`);
    const caps = record(sc.capabilities);
    if (!strings(caps?.drop).includes("ALL")) found.push(`container ${name} does not drop ALL capabilities`);
    // Those beyond baseline's list are named above already.
    const added = strings(caps?.add).filter((cap) => cap !== "NET_BIND_SERVICE" && BASELINE_CAPABILITIES.includes(cap));
    if (added.length > 0) found.push(`container ${name} adds ${added.join(", ")}`);
  }
  return found;
}

/** What in the pod spec the Pod Security Standard `level` refuses, as words for a message; empty when it passes. */
export function podStandardViolations(spec: Props, level: PodStandard): string[] {
  const pod = record(spec.securityContext) ?? {};
  const cs = containersOf(spec);
  return [...baseline(spec, pod, cs), ...(level === "restricted" ? restricted(spec, pod, cs) : [])];
}

/** Namespace name → enforce level of each Namespace the stack creates. */
export function namespaceLevels(resources: readonly { type: string; props: unknown }[]): Map<string, string | undefined> {
  const levels = new Map<string, string | undefined>();
  for (const r of resources.filter((x) => x.type === NAMESPACE_TYPE)) {
    const meta = record(record(r.props)?.metadata);
    const name = str(meta?.name);
    if (name !== undefined) levels.set(name, stringMap(meta?.labels)[PSA_ENFORCE]);
  }
  return levels;
}

export const podsMeetNamespaceLevel: StackValidationPolicy = {
  name: "pods-meet-namespace-level",
  description:
    "L1–L3 roll out whole: every workload in a Namespace the stack creates passes the Pod Security Standard that Namespace enforces (baseline or restricted: " +
    "no host network or hostPath, non-root, no privilege escalation, RuntimeDefault seccomp, ALL capabilities dropped), so Pod Security Admission never refuses a pod halfway through an update.",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    const levels = namespaceLevels(args.resources);
    for (const r of args.resources.filter((x) => WORKLOAD_TYPES.includes(x.type))) {
      const props = r.props as Props;
      const ns = namespaceOf(props);
      const level = levels.get(ns);
      if (level !== "baseline" && level !== "restricted") continue;
      const spec = podSpecOf(r.type, props);
      const found = spec ? podStandardViolations(spec, level) : [];
      if (found.length > 0) reportViolation(`${str(props.kind) ?? r.type} ${nameOf(props, r.name)} in namespace ${ns} (enforce ${level}) would be refused by Pod Security Admission: ${found.join("; ")}.`, r.urn);
    }
  },
};
