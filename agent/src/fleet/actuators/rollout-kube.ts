/**
 * The rollout on a real cluster (granularity `az`): one call changes one AZ's inference
 * Deployments' pod template, and each Deployment's own rolling update (one pod at a time,
 * `maxSurge: 0`, the preStop drain hook) moves its pods. Through the Kubernetes API with the
 * controller's own ServiceAccount (kube-client.ts, as the repairs), in the inference namespace
 * only (infra/workloads/controller-access.ts `controllerRolloutAccess`):
 *
 * - list the AZ's inference Deployments (`app.kubernetes.io/name=inference,llm-ha.io/az=<az>`);
 * - refuse the switch (`refused-stale`) when any of them carries a rollout token
 *   (`llm-ha.io/rollout-token`) above the caller's: a newer leader term patched it;
 * - `already` when each serves the wanted revision (its template's `llm-ha.io/model-revision`)
 *   and image;
 * - else a strategic merge patch of each that differs, carrying its `resourceVersion` (a
 *   concurrent change makes it 409, nothing half-done): the revision annotation, the image of
 *   every container running the old inference image, and the rollout's id and token on the
 *   Deployment. A Deployment without Pulumi's handover marker (`llm-ha.io/rollout: handover`)
 *   is not patched: the next `pulumi up` would set its old image back fleet-wide.
 *
 * `kubeRolloutRequests` reads the `llm-ha-rollout` ConfigMap the Pulumi program writes (the
 * stack's wanted revision and image) as a `start` request; the leader acts once per id.
 */
import type { Logger } from "../../util/log";
import type { Revision, RolloutActuator, RolloutRequest, RolloutSwitchRequest, RolloutSwitchResult } from "../rollout/types";
import { kubeCall, type KubeApiOptions } from "./kube-client";
import {
  HANDOVER,
  MODEL_REVISION_ANNOTATION,
  ROLLOUT_CONFIGMAP,
  ROLLOUT_FIELD_MANAGER,
  ROLLOUT_HANDOVER_ANNOTATION,
  ROLLOUT_ID_ANNOTATION,
  ROLLOUT_KEYS,
  ROLLOUT_TOKEN_ANNOTATION,
} from "../../../../contracts/rollout-kube";

export interface KubeRolloutOptions extends KubeApiOptions {
  /** The inference namespace (its Deployments and the `llm-ha-rollout` ConfigMap). */
  namespace: string;
  log: Logger;
  /** Label selector of the inference Deployments. Default `app.kubernetes.io/name=inference`. */
  selector?: string;
  /** The AZ label on them. Default `llm-ha.io/az`. */
  azLabel?: string;
}

interface Container {
  name?: string;
  image?: string;
}
interface KubeDeployment {
  metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec?: { template?: { metadata?: { annotations?: Record<string, string> }; spec?: { containers?: Container[]; initContainers?: Container[] } } };
}

const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** An image reference: registry/repository[:tag][@sha256:…] (tags may hold capitals), no spaces or shell characters. */
const IMAGE = /^[a-z0-9][A-Za-z0-9._\-/:]*(@sha256:[0-9a-f]{64})?$/;

const result = (outcome: RolloutSwitchResult["outcome"], detail: string): RolloutSwitchResult => ({ outcome, detail });

/** The revision and image one Deployment's template asks for (its first container's image: vLLM). */
export function templateRevision(d: KubeDeployment): Revision {
  const t = d.spec?.template;
  return { revision: t?.metadata?.annotations?.[MODEL_REVISION_ANNOTATION] ?? "", image: t?.spec?.containers?.[0]?.image };
}

/** The strategic merge patch that moves `d` to `to`, or null when it asks for it already. */
export function rolloutPatch(d: KubeDeployment, to: Revision, rolloutId: string, token: number): object | null {
  const now = templateRevision(d);
  const old = now.image;
  const swap = (cs: Container[] | undefined) => (cs ?? []).filter((c) => to.image !== undefined && old !== undefined && c.image === old && c.image !== to.image).map((c) => ({ name: c.name, image: to.image }));
  const containers = swap(d.spec?.template?.spec?.containers);
  const initContainers = swap(d.spec?.template?.spec?.initContainers);
  const revisionChanges = now.revision !== to.revision;
  if (!revisionChanges && !containers.length && !initContainers.length) return null;
  return {
    metadata: { resourceVersion: d.metadata?.resourceVersion, annotations: { [ROLLOUT_ID_ANNOTATION]: rolloutId, [ROLLOUT_TOKEN_ANNOTATION]: String(token) } },
    spec: {
      template: {
        ...(revisionChanges ? { metadata: { annotations: { [MODEL_REVISION_ANNOTATION]: to.revision } } } : {}),
        ...(containers.length || initContainers.length ? { spec: { ...(containers.length ? { containers } : {}), ...(initContainers.length ? { initContainers } : {}) } } : {}),
      },
    },
  };
}

export function kubeRolloutActuator(o: KubeRolloutOptions): RolloutActuator {
  if (!NAMESPACE.test(o.namespace)) throw new Error(`rollout actuator: ${JSON.stringify(o.namespace)} is not a namespace name`);
  const base = `/apis/apps/v1/namespaces/${o.namespace}/deployments`;
  const selector = o.selector ?? "app.kubernetes.io/name=inference";
  const azLabel = o.azLabel ?? "llm-ha.io/az";
  return {
    kind: "kubernetes",
    granularity: "az",
    async switch(req: RolloutSwitchRequest): Promise<RolloutSwitchResult> {
      if (!LABEL_VALUE.test(req.az)) return result("failed", `${JSON.stringify(req.az.slice(0, 64))} is not an AZ name`);
      if (!req.to.revision || /[\s"'`$\\]/.test(req.to.revision) || req.to.revision.length > 1024) return result("failed", `revision ${JSON.stringify(req.to.revision.slice(0, 80))} is empty or not one word`);
      if (req.to.image !== undefined && !IMAGE.test(req.to.image)) return result("failed", `image ${JSON.stringify(req.to.image.slice(0, 120))} is not an image reference`);
      const list = await kubeCall(o, "GET", `${base}?${new URLSearchParams({ labelSelector: `${selector},${azLabel}=${req.az}` }).toString()}`);
      if (list.status !== 200) return result("failed", `list inference Deployments in ${req.az}: HTTP ${list.status} ${list.text.slice(0, 200)}`);
      const items = (list.body as { items?: unknown } | null)?.items;
      if (!Array.isArray(items)) return result("failed", `list inference Deployments in ${req.az}: not a DeploymentList`);
      const deps = (items as KubeDeployment[]).filter((d) => typeof d?.metadata?.name === "string").sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
      if (!deps.length) return result("failed", `no inference Deployment in ${req.az} (namespace ${o.namespace}, ${selector})`);
      // A newer leader term has patched one of them: this (stale) leader changes nothing.
      for (const d of deps) {
        const t = Number(d.metadata?.annotations?.[ROLLOUT_TOKEN_ANNOTATION] ?? "");
        if (Number.isFinite(t) && t > req.token) return result("refused-stale", `${d.metadata!.name} was patched under token ${t} (rollout ${d.metadata?.annotations?.[ROLLOUT_ID_ANNOTATION] ?? "?"}); this leader holds ${req.token}`);
      }
      const patches = deps.map((d) => ({ d, patch: rolloutPatch(d, req.to, req.rolloutId, req.token) })).filter((x) => x.patch !== null);
      const target = `${req.to.revision}${req.to.image ? ` (${req.to.image})` : ""}`;
      if (!patches.length) return result("already", `${deps.map((d) => d.metadata!.name).join(", ")} ask for ${target} already`);
      const unmarked = patches.filter(({ d }) => d.metadata?.annotations?.[ROLLOUT_HANDOVER_ANNOTATION] !== HANDOVER).map(({ d }) => d.metadata!.name);
      if (unmarked.length) return result("failed", `${unmarked.join(", ")} not handed to the rollout (no ${ROLLOUT_HANDOVER_ANNOTATION}: ${HANDOVER}): Pulumi would set its old image back; update the stack first`);
      const done: string[] = [];
      for (const { d, patch } of patches) {
        const name = d.metadata!.name!;
        const r = await kubeCall(o, "PATCH", `${base}/${name}?fieldManager=${ROLLOUT_FIELD_MANAGER}`, patch, "application/strategic-merge-patch+json");
        if (r.status === 409) return result("failed", `${name} changed while patching (HTTP 409); ${done.length ? `${done.join(", ")} patched; ` : ""}asked again next period`);
        if (r.status !== 200) return result("failed", `PATCH ${name}: HTTP ${r.status} ${r.text.slice(0, 200)}${done.length ? `; ${done.join(", ")} patched` : ""}`);
        done.push(name);
        o.log.info({ deployment: name, az: req.az, rollout: req.rolloutId, token: req.token, revision: req.to.revision, image: req.to.image }, "rollout: inference Deployment patched");
      }
      return result("applied", `${done.join(", ")} → ${target}: their rolling update moves the pods one at a time`);
    },
  };
}

interface KubeConfigMap {
  metadata?: { creationTimestamp?: string; managedFields?: { time?: string; fieldsV1?: Record<string, unknown> }[] };
  data?: Record<string, unknown>;
}

/**
 * When the ConfigMap's data was last written: the latest `managedFields` time of a manager
 * that owns `data` (a no-op `pulumi up` does not move it), else its creation; 0 when neither
 * is given. The same on every read until the data changes, so the request is one request.
 */
export function configMapWrittenAt(cm: KubeConfigMap): number {
  const times = (cm.metadata?.managedFields ?? []).filter((m) => m.fieldsV1?.["f:data"] !== undefined).map((m) => Date.parse(m.time ?? ""));
  const t = Math.max(...times.filter(Number.isFinite), Date.parse(cm.metadata?.creationTimestamp ?? "") || 0);
  return Number.isFinite(t) ? t : 0;
}

/**
 * The Pulumi program's wanted revision (the `llm-ha-rollout` ConfigMap) as a `start` request,
 * or null when there is none (no ConfigMap: a stack without the handover, or not yet created).
 * Its `at` is when the data was last written, so reading it every period gives the same
 * request. A ConfigMap that cannot be read as one is an error the caller logs; it starts nothing.
 */
export async function kubeRolloutRequests(o: Omit<KubeRolloutOptions, "selector" | "azLabel">): Promise<RolloutRequest | null> {
  if (!NAMESPACE.test(o.namespace)) throw new Error(`rollout requests: ${JSON.stringify(o.namespace)} is not a namespace name`);
  const r = await kubeCall(o, "GET", `/api/v1/namespaces/${o.namespace}/configmaps/${ROLLOUT_CONFIGMAP}`);
  if (r.status === 404) return null;
  if (r.status !== 200) throw new Error(`read ConfigMap ${o.namespace}/${ROLLOUT_CONFIGMAP}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
  const cm = (r.body ?? {}) as KubeConfigMap;
  const data = cm.data ?? {};
  const str = (k: string): string | undefined => (typeof data[k] === "string" && data[k] !== "" ? (data[k] as string) : undefined);
  const id = str(ROLLOUT_KEYS.id);
  const revision = str(ROLLOUT_KEYS.revision);
  const image = str(ROLLOUT_KEYS.image);
  if (!id || !revision) throw new Error(`ConfigMap ${o.namespace}/${ROLLOUT_CONFIGMAP} has no ${!id ? ROLLOUT_KEYS.id : ROLLOUT_KEYS.revision}`);
  if (image !== undefined && !IMAGE.test(image)) throw new Error(`ConfigMap ${o.namespace}/${ROLLOUT_CONFIGMAP}: ${ROLLOUT_KEYS.image} ${JSON.stringify(image.slice(0, 120))} is not an image reference`);
  return { op: "start", id, at: configMapWrittenAt(cm), to: { revision, ...(image ? { image } : {}) }, by: str(ROLLOUT_KEYS.by) ?? "pulumi" };
}
