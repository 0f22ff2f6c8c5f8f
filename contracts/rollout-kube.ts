/**
 * How a model or engine rollout reaches Kubernetes: the names the Pulumi program writes into
 * the inference Deployments and the `llm-ha-rollout` ConfigMap, and the controller's rollout
 * actuator reads and patches (agent/src/fleet/actuators/rollout-kube.ts).
 *
 * - The revision a pod loads lives in one place, the pod template's annotation
 *   `MODEL_REVISION_ANNOTATION`; the vLLM container reads it through the downward API into
 *   `MODEL_SOURCE_ENV` and its `--model $(LLMHA_MODEL_SOURCE)` argument (Kubernetes expands
 *   `$(VAR)` in args), so a rollout changes one annotation, not an argument list.
 * - The engine image is the `image` of each container that runs the inference image.
 * - After a Deployment exists, Pulumi keeps both as they are (`ignoreChanges`) and marks the
 *   Deployment with `ROLLOUT_HANDOVER_ANNOTATION`; the stack's wanted revision and image go to
 *   the ConfigMap `ROLLOUT_CONFIGMAP`, which the leader reads as a `start` request.
 */
import { createHash } from "node:crypto";

/** Pod template annotation: the revision the pods load (what vLLM reports as `root`: the S3 copy's URI, or the hub id). */
export const MODEL_REVISION_ANNOTATION = "llm-ha.io/model-revision";
/** The vLLM container's variable holding `MODEL_REVISION_ANNOTATION` (downward API), used as `--model $(LLMHA_MODEL_SOURCE)`. */
export const MODEL_SOURCE_ENV = "LLMHA_MODEL_SOURCE";
/** Deployment annotation: Pulumi hands the image and revision of this Deployment to the rollout (value `HANDOVER`). */
export const ROLLOUT_HANDOVER_ANNOTATION = "llm-ha.io/rollout";
export const HANDOVER = "handover";
/** Deployment annotations the rollout actuator stamps: the rollout's id and the fencing token of the leader term that patched. */
export const ROLLOUT_ID_ANNOTATION = "llm-ha.io/rollout-id";
export const ROLLOUT_TOKEN_ANNOTATION = "llm-ha.io/rollout-token";
/** The ConfigMap (in the inference namespace) with the stack's wanted revision: keys of `ROLLOUT_KEYS`. */
export const ROLLOUT_CONFIGMAP = "llm-ha-rollout";
export const ROLLOUT_KEYS = Object.freeze({ id: "id", revision: "to.revision", image: "to.image", by: "by" });
/** Field manager of the actuator's patches (server-side field ownership). */
export const ROLLOUT_FIELD_MANAGER = "llm-ha-rollout";

/** `pulumi-<12 hex>`: the request id of a (revision, image) pair, the same on every run of the program. */
export function pulumiRolloutId(revision: string, image: string): string {
  return `pulumi-${createHash("sha256").update(`${revision}\n${image}`).digest("hex").slice(0, 12)}`;
}
