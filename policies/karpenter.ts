// Karpenter NodePools (an existing cluster's GPU capacity, `llm-ha:capacity.engine: karpenter`):
// the same invariants as the GPU node groups: one AZ per pool, the GPU taint, and a standby that
// sleeps at zero and stays where the leader put it.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { AZ_LABEL, GPU_RESOURCE, GPU_TAINT_KEY, NODEPOOL_TYPE, POOL_ROLE_LABEL, nodePoolAzs } from "./conventions";
import { list, record, str, stringMap, type Props } from "./props";

/** A NodePool of llm-ha's (it carries the AZ label on the pool or its node template). */
function llmHaPools(resources: readonly PolicyResource[]): PolicyResource[] {
  return resources.filter((r) => r.type === NODEPOOL_TYPE && (poolLabels(r.props as Props)[AZ_LABEL] !== undefined || stringMap(record((r.props as Props).metadata)?.labels)[AZ_LABEL] !== undefined));
}

function poolLabels(p: Props): Record<string, string> {
  return stringMap(record(record(record(p.spec)?.template)?.metadata)?.labels);
}

function poolName(r: PolicyResource): string {
  return str(record((r.props as Props).metadata)?.name) ?? r.name;
}

export const nodePoolSingleAz: StackValidationPolicy = {
  name: "nodepool-single-az",
  description:
    "Each llm-ha NodePool requires exactly one zone (topology.kubernetes.io/zone In [one AZ]), the AZ its nodes are labelled with (L2/L3: an AZ's GPU capacity is pools the leader can count and wake; a pool spanning zones lets Karpenter move an AZ's capacity into another, and losing a zone takes out more than its pools).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const r of llmHaPools(args.resources)) {
      const azs = nodePoolAzs(r.props as Props);
      const label = poolLabels(r.props as Props)[AZ_LABEL];
      if (azs.length !== 1) reportViolation(`NodePool ${poolName(r)} requires ${azs.length === 0 ? "no zone" : `${azs.length} zones (${azs.join(", ")})`}: pin it to one AZ with a topology.kubernetes.io/zone In [<az>] requirement.`, r.urn);
      else if (label !== undefined && label !== azs[0]) reportViolation(`NodePool ${poolName(r)} launches in ${azs[0]} but labels its nodes ${AZ_LABEL}=${label}: the agents and inference pods of ${label} would land in another AZ.`, r.urn);
    }
  },
};

export const nodePoolGpuTaint: StackValidationPolicy = {
  name: "nodepool-gpu-taint",
  description: `Each llm-ha NodePool taints its nodes ${GPU_TAINT_KEY}:NoSchedule (L1 node tier: only GPU workloads, which tolerate it, land on a GPU node; anything else there takes a slot from inference or shares its failure).`,
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const r of llmHaPools(args.resources)) {
      const taints = list(record(record(record((r.props as Props).spec)?.template)?.spec)?.taints).map(record);
      if (!taints.some((t) => str(t?.key) === GPU_TAINT_KEY && str(t?.effect) === "NoSchedule")) {
        reportViolation(`NodePool ${poolName(r)} does not taint its nodes ${GPU_TAINT_KEY}:NoSchedule: other pods could take its GPU nodes.`, r.urn);
      }
    }
  },
};

export const nodePoolStandbyLimits: StackValidationPolicy = {
  name: "nodepool-standby-limits",
  description:
    `A standby or fallback NodePool (${POOL_ROLE_LABEL}: standby|fallback) is created asleep (spec.limits ${GPU_RESOURCE}: "0") and ignores changes to spec.limits; every other llm-ha pool has a ${GPU_RESOURCE} limit (L3: the standby costs nothing until the leader wakes it, and a pulumi up during a wake must not put a woken standby back to zero under live traffic; an active pool without a limit can grow without bound).`,
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateStack: (args, reportViolation) => {
    for (const r of llmHaPools(args.resources)) {
      const p = r.props as Props;
      const role = poolLabels(p)[POOL_ROLE_LABEL] ?? stringMap(record(p.metadata)?.labels)[POOL_ROLE_LABEL];
      const limit = record(record(p.spec)?.limits)?.[GPU_RESOURCE];
      if (role === "standby" || role === "fallback") {
        if (String(limit) !== "0") reportViolation(`NodePool ${poolName(r)} (${role}) is created with ${GPU_RESOURCE} limit ${limit === undefined ? "unset" : JSON.stringify(limit)}: a sleeping pool's limit is "0" (the leader raises it on a wake).`, r.urn);
        if (!r.opts.ignoreChanges.some((c) => c === "spec.limits" || c === "spec")) reportViolation(`NodePool ${poolName(r)} (${role}) does not ignore changes to spec.limits: a pulumi up during a wake would put it back to zero.`, r.urn);
      } else if (limit === undefined) {
        reportViolation(`NodePool ${poolName(r)} has no ${GPU_RESOURCE} limit: Karpenter could launch GPU nodes without bound.`, r.urn);
      }
    }
  },
};
