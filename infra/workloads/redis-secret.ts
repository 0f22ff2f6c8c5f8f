/**
 * How a container reaches Redis with its role's credential: the URL without its password in
 * `LLMHA_REDIS_URL` (the Secret's `endpoint`), the password as a file in a volume of its own
 * (`LLMHA_REDIS_PASSWORD_FILE`), never in the environment that children inherit or in a URL
 * that a log line could carry. One Secret per Redis role (infra/workloads/index.ts).
 */
import type * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";

type EnvVar = k8s.types.input.core.v1.EnvVar;
type VolumeMount = k8s.types.input.core.v1.VolumeMount;
type Volume = k8s.types.input.core.v1.Volume;

export interface RedisCredential {
  env: EnvVar[];
  mount: VolumeMount;
  volume: Volume;
}

/**
 * The env, mount and volume for `secretName` under `/run/secrets/<volume>`. `mode`: 0o440 where
 * the pod's fsGroup is the reader's group, 0o444 where no fsGroup is set (the file stays inside
 * the one container that mounts it).
 */
export function redisCredential(secretName: string, volume: string, mode = 0o444): RedisCredential {
  const dir = `/run/secrets/${volume}`;
  return {
    env: [
      { name: "LLMHA_REDIS_URL", valueFrom: { secretKeyRef: { name: secretName, key: "endpoint" } } },
      { name: "LLMHA_REDIS_PASSWORD_FILE", value: `${dir}/password` },
    ],
    mount: { name: volume, mountPath: dir, readOnly: true },
    volume: { name: volume, secret: { secretName, items: [{ key: "password", path: "password" }], defaultMode: mode } },
  };
}

/** The workloads that reach Redis, each with its own user where roles are on (contracts/redis-roles.ts). */
export type RedisWorkloadRole = "agent" | "controller" | "fallback" | "edge";

/**
 * The namespace each Redis client runs in (infra/workloads/namespaces.ts): the GPU-node agents in
 * the workloads namespace, the controller and the L1 pod's two clients in the edge namespace. A
 * pod reads Secrets of its own namespace only, so each role's Secret goes where its pods are.
 */
export const REDIS_ROLE_TIER: Readonly<Record<RedisWorkloadRole, "workloads" | "edge">> = Object.freeze({ agent: "workloads", controller: "edge", fallback: "edge", edge: "edge" });

/** The Redis URL split for a program that reads its password from a file: `endpoint` (no password in it) and `password`. */
export function redisSecretParts(redisUrl: pulumi.Input<string>): { endpoint: pulumi.Output<string>; password: pulumi.Output<string> } {
  const parts = pulumi.output(redisUrl).apply((u) => {
    const x = new URL(u);
    const password = decodeURIComponent(x.password);
    x.password = "";
    return { endpoint: x.toString().replace(/\/$/, ""), password };
  });
  return { endpoint: pulumi.secret(parts.endpoint), password: pulumi.secret(parts.password) };
}
