/**
 * Every container image the stack runs, pinned by digest, and where the nodes pull it from.
 * A tag can move under running nodes (a rebuilt `2.6-alpine` is another image); a digest
 * cannot. Images from Docker Hub and ECR Public go through ECR pull-through cache
 * repositories the stack creates (infra/image-cache.ts): a standby wake of many nodes behind
 * one NAT address does not meet Docker Hub's anonymous pull limit (10 per hour per address),
 * and a registry outage does not stop a node whose image is already cached in the region.
 *
 * A digest here was read from the registry's own metadata as cited by several public
 * projects (never guessed); where none could be confirmed, the digest is a stack setting
 * (`llm-ha:images.<name>Digest`) that `llm-ha preflight` asks for, with the command that
 * reads it.
 */

/** The ECR pull-through cache rules the stack creates: repository prefix → upstream registry. */
export const CACHE_UPSTREAMS = Object.freeze({
  /** ECR Public: anonymous upstream, no credential; also serves Docker's official images (`docker/library/…`). */
  "ecr-public": "public.ecr.aws",
  /** Docker Hub: needs a Secrets Manager secret named `ecr-pullthroughcache/…` (`llm-ha:images.dockerHubSecretArn`). */
  "docker-hub": "registry-1.docker.io",
});
export type CachePrefix = keyof typeof CACHE_UPSTREAMS;

export interface PinnedImage {
  /** Upstream repository, registry included (`docker.io/vllm/vllm-openai`). */
  readonly repository: string;
  /** The tag the digest was read from: for people and for `crane digest`, never pulled by. */
  readonly tag: string;
  /** `sha256:<64 hex>`, or null when it must come from the stack setting `setting`. */
  readonly digest: string | null;
  /** `llm-ha:images.<setting>` that supplies or overrides the digest. */
  readonly setting: string;
}

export const SHA256_DIGEST = /^sha256:[0-9a-f]{64}$/;

/** The images of the stack. */
export const IMAGES = Object.freeze({
  /** vLLM 0.31.0 (2026-10): CVE-2025-48942/48943 fixed (≥ 0.9.0). Manifest-list digest. */
  vllm: {
    repository: "docker.io/vllm/vllm-openai",
    tag: "v0.31.0",
    digest: "sha256:c1c9f6fd5c109ba7f0546a59f5b2f15fb87f64c77782e90a27b648b42a8e67c3",
    setting: "vllmDigest",
  },
  /** HAProxy 2.6 LTS (what the drill and the tests run): Docker's official image, from its ECR Public mirror. */
  haproxy: { repository: "public.ecr.aws/docker/library/haproxy", tag: "2.6-alpine", digest: null, setting: "haproxyDigest" },
  /** The S3 weights prefetch init container. */
  awsCli: { repository: "public.ecr.aws/aws-cli/aws-cli", tag: "2.27.50", digest: null, setting: "awsCliDigest" },
  /** NVIDIA device plugin v0.17.1. nvcr.io is not an upstream ECR pull-through caches, and it has no anonymous pull limit: pulled from there, by digest. */
  devicePlugin: {
    repository: "nvcr.io/nvidia/k8s-device-plugin",
    tag: "v0.17.1",
    digest: "sha256:af31e2b7c7f89834c4e5219860def7ac2e49a207b3d4e8610d5a26772b7738e5",
    setting: "devicePluginDigest",
  },
  /**
   * NVIDIA's DCGM exporter (DCGM 4.4.1, exporter 4.6.0) on the GPU nodes (infra/workloads/dcgm-exporter.ts). No digest
   * could be confirmed here: `llm-ha:images.dcgmExporterDigest` supplies it. nvcr.io, like the device plugin: pulled
   * directly.
   */
  dcgmExporter: { repository: "nvcr.io/nvidia/k8s/dcgm-exporter", tag: "4.4.1-4.6.0-ubuntu22.04", digest: null, setting: "dcgmExporterDigest" },
  /** The AWS Load Balancer Controller image the chart runs (chart 3.5.0 ships v3.5.0: the same number from 3.0). */
  lbController: { repository: "public.ecr.aws/eks/aws-load-balancer-controller", tag: "v3.5.0", digest: null, setting: "lbControllerDigest" },
} satisfies Record<string, PinnedImage>);
export type ImageName = keyof typeof IMAGES;

/** `crane digest` / `docker buildx imagetools inspect` of one image: what preflight tells the user to run. */
export function digestCommand(image: PinnedImage): string {
  const ref = `${image.repository.replace(/^docker\.io\//, "")}:${image.tag}`;
  return `crane digest ${ref} (or: docker buildx imagetools inspect ${ref} --format '{{json .Manifest.Digest}}')`;
}

/** Which cache rule an upstream reference goes through, and its path there; null when none serves it. */
export function cachePath(repository: string): { prefix: CachePrefix; path: string } | null {
  const [first, ...rest] = repository.split("/");
  const hasRegistry = first.includes(".") || first.includes(":") || first === "localhost";
  if (!hasRegistry) return { prefix: "docker-hub", path: rest.length === 0 ? `library/${first}` : repository };
  if (first === "docker.io") return { prefix: "docker-hub", path: rest.length === 1 ? `library/${rest[0]}` : rest.join("/") };
  if (first === "public.ecr.aws") return { prefix: "ecr-public", path: rest.join("/") };
  return null;
}

/**
 * `repo@sha256:…` as the nodes pull it: through the stack's cache rules under `cacheRoot`
 * (`<account>.dkr.ecr.<region>.amazonaws.com/<cluster>`) where a rule serves the upstream,
 * else from the upstream itself. A reference without a digest is refused: the policy
 * `images-by-digest` would refuse the workload anyway.
 */
export function pullRef(repository: string, digest: string, cacheRoot: string): string {
  if (!SHA256_DIGEST.test(digest)) throw new ImageRefError(`${repository}: ${digest} is not a sha256 digest`);
  const c = cachePath(repository);
  return c ? `${cacheRoot}/${c.prefix}/${c.path}@${digest}` : `${repository}@${digest}`;
}

/** A `repo[:tag]@sha256:…` setting as the nodes pull it (see `pullRef`). */
export function pullRefOf(ref: string, cacheRoot: string): string {
  const r = splitDigestRef(ref);
  if (!r) throw new ImageRefError(`${ref} names no digest`);
  return pullRef(r.repository, r.digest, cacheRoot);
}

/** `repo[:tag]@sha256:…` → repository and digest; null when the reference has no digest. */
export function splitDigestRef(ref: string): { repository: string; digest: string } | null {
  const at = ref.lastIndexOf("@");
  if (at < 0 || !SHA256_DIGEST.test(ref.slice(at + 1))) return null;
  const name = ref.slice(0, at);
  const lastSlash = name.lastIndexOf("/");
  const colon = name.lastIndexOf(":");
  return { repository: colon > lastSlash ? name.slice(0, colon) : name, digest: ref.slice(at + 1) };
}

export class ImageRefError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ImageRefError";
  }
}
