// Change without fear: a model or engine change reaches the fleet AZ by AZ, through the leader's
// rollout (canaries, burn rates, bake, automatic rollback), never as every AZ's rolling update at
// once. The program hands each inference Deployment's revision and image to the rollout once it
// exists (contracts/rollout-kube.ts); a Deployment that Pulumi still updates in place takes the
// next model or image change fleet-wide, bypassing every gate.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { HANDOVER, MODEL_REVISION_ANNOTATION, ROLLOUT_CONFIGMAP, ROLLOUT_HANDOVER_ANNOTATION, ROLLOUT_KEYS } from "../contracts/rollout-kube";
import { GPU_RESOURCE, nameOf } from "./conventions";
import { requestsGpu } from "./k8s";
import { list, num, record, str, stringMap, type Props } from "./props";

const DEPLOYMENT_TYPE = "kubernetes:apps/v1:Deployment";
const CONFIGMAP_TYPE = "kubernetes:core/v1:ConfigMap";

const asksGpu = (c: Props): boolean => {
  const res = record(c.resources);
  const amount = num(record(res?.limits)?.[GPU_RESOURCE]) ?? num(record(res?.requests)?.[GPU_RESOURCE]);
  return amount !== undefined && amount > 0;
};

/** What one inference Deployment lacks to be the rollout's, in words (empty: handed over). */
function lacks(r: PolicyResource, configMaps: Map<string, Props>): string[] {
  const props = r.props as Props;
  const template = record(record(props.spec)?.template);
  const spec = record(template?.spec) ?? {};
  const out: string[] = [];
  if (stringMap(record(props.metadata)?.annotations)[ROLLOUT_HANDOVER_ANNOTATION] !== HANDOVER) out.push(`the ${ROLLOUT_HANDOVER_ANNOTATION}: ${HANDOVER} annotation`);
  const revision = stringMap(record(template?.metadata)?.annotations)[MODEL_REVISION_ANNOTATION];
  if (revision === undefined) out.push(`its revision in the pod template's ${MODEL_REVISION_ANNOTATION} annotation`);
  const ignored = new Set(r.opts.ignoreChanges);
  const revisionPath = `spec.template.metadata.annotations["${MODEL_REVISION_ANNOTATION}"]`;
  if (!ignored.has(revisionPath) && !ignored.has("spec.template")) out.push(`ignoreChanges on ${revisionPath}`);
  const containers = list(spec.containers).map(record);
  const gpu = containers.map((c, i) => ({ c, i })).filter((x): x is { c: Props; i: number } => x.c !== undefined && asksGpu(x.c));
  const images = new Set(gpu.map(({ c }) => str(c.image) ?? ""));
  const unignored = [
    ...containers.map((c, i) => ({ c, path: `spec.template.spec.containers[${i}].image` })),
    ...list(spec.initContainers).map(record).map((c, i) => ({ c, path: `spec.template.spec.initContainers[${i}].image` })),
  ].filter(({ c, path }) => c !== undefined && images.has(str(c.image) ?? "") && !ignored.has(path) && !ignored.has("spec.template"));
  if (unignored.length) out.push(`ignoreChanges on ${unignored.map((u) => u.path).join(", ")} (the inference image)`);
  const ns = str(record(props.metadata)?.namespace) ?? "default";
  const cm = configMaps.get(ns);
  if (cm === undefined) out.push(`the ${ROLLOUT_CONFIGMAP} ConfigMap in namespace ${ns} (the stack's wanted revision and image, for the leader)`);
  else {
    const data = stringMap(cm.data);
    if (revision !== undefined && data[ROLLOUT_KEYS.revision] !== revision) out.push(`${ROLLOUT_CONFIGMAP} ${ROLLOUT_KEYS.revision} equal to its revision ${JSON.stringify(revision)} (it says ${JSON.stringify(data[ROLLOUT_KEYS.revision] ?? null)})`);
    const image = [...images][0];
    if (image !== undefined && data[ROLLOUT_KEYS.image] !== image) out.push(`${ROLLOUT_CONFIGMAP} ${ROLLOUT_KEYS.image} equal to its image (it says ${JSON.stringify(data[ROLLOUT_KEYS.image] ?? null)})`);
    if (!data[ROLLOUT_KEYS.id]) out.push(`an ${ROLLOUT_KEYS.id} in ${ROLLOUT_CONFIGMAP}`);
  }
  return out;
}

export const inferenceRolloutHandover: StackValidationPolicy = {
  name: "inference-rollout-handover",
  description:
    `Every inference Deployment (requesting ${GPU_RESOURCE}) hands its model revision and engine image to the leader's AZ-by-AZ rollout: the ${ROLLOUT_HANDOVER_ANNOTATION}: ${HANDOVER} marker, its revision in the pod template's ${MODEL_REVISION_ANNOTATION} annotation, ignoreChanges on that annotation and on every container image that is the inference image, and the ${ROLLOUT_CONFIGMAP} ConfigMap in its namespace naming the same revision and image. Otherwise a stack change of model or image updates every AZ at once, past the canaries and the automatic rollback (L2–L4: a bad model in every AZ leaves no AZ to fail over to).`,
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    const configMaps = new Map<string, Props>();
    for (const r of args.resources) {
      const p = r.props as Props;
      if (r.type === CONFIGMAP_TYPE && str(record(p.metadata)?.name) === ROLLOUT_CONFIGMAP) configMaps.set(str(record(p.metadata)?.namespace) ?? "default", p);
    }
    for (const r of args.resources) {
      if (r.type !== DEPLOYMENT_TYPE || !requestsGpu(r.props as Props)) continue;
      const missing = lacks(r, configMaps);
      if (missing.length) {
        reportViolation(
          `Deployment ${nameOf(r.props as Props, r.name)} would take a model or engine change fleet-wide, bypassing the rollout: it lacks ${missing.join("; ")}. Build it with infra/workloads/inference.ts (inferenceManifests, rolloutIgnoreChanges) and the ConfigMap of infra/workloads/rollout.ts.`,
          r.urn,
        );
      }
    }
  },
};
