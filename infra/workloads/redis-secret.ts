/**
 * How a container reaches Redis with its role's credential: the URL without its password in
 * `LLMHA_REDIS_URL` (the Secret's `endpoint`), the password as a file in a volume of its own
 * (`LLMHA_REDIS_PASSWORD_FILE`), never in the environment that children inherit or in a URL
 * that a log line could carry. One Secret per Redis role (infra/workloads/index.ts).
 */
import type * as k8s from "@pulumi/kubernetes";

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
