import * as pulumi from "@pulumi/pulumi";
import { pulumiRolloutId, ROLLOUT_CONFIGMAP, ROLLOUT_KEYS } from "../../contracts/rollout-kube";
import { APP } from "../names";
import { objectName, type ConfigMap } from "./common";

/** The inference Deployments' names (one per AZ and GPU class, as `inferenceManifests` names them): what the rollout may patch. */
export function inferenceDeploymentNames(azs: readonly string[], gpuClasses: readonly { name: string }[]): string[] {
  return azs.flatMap((az) => gpuClasses.map((c) => objectName("inference", az, c.name)));
}

/**
 * The `llm-ha-rollout` ConfigMap in the inference namespace: the stack's wanted model revision
 * and engine image (`to.revision`, `to.image`), its request id (`pulumi-<hash>` of both: the
 * same on every run, so the leader acts once per change) and `by: pulumi`. The controller
 * reads it as a `start` request (agent/src/fleet/actuators/rollout-kube.ts); the inference
 * Deployments keep their own image and revision once they exist (`rolloutIgnoreChanges`).
 */
export function rolloutConfigMap(namespace: string, revision: string, image: pulumi.Input<string>): ConfigMap {
  return {
    metadata: { name: ROLLOUT_CONFIGMAP, namespace, labels: { "app.kubernetes.io/name": APP.controller, "app.kubernetes.io/part-of": "llm-ha" } },
    data: pulumi.output(image).apply((img) => ({
      [ROLLOUT_KEYS.id]: pulumiRolloutId(revision, img),
      [ROLLOUT_KEYS.revision]: revision,
      [ROLLOUT_KEYS.image]: img,
      [ROLLOUT_KEYS.by]: "pulumi",
    })),
  };
}
