/**
 * Fast image pull on the GPU nodes: nodeadm's `FastImagePull` feature gate (AL2023 EKS AMIs)
 * runs containerd with the SOCI snapshotter in parallel pull/unpack mode — layers downloaded in
 * chunks and unpacked concurrently, on ordinary OCI images (no SOCI index, no rebuild). AWS
 * marks the gate experimental. The snapshotter's root (`SOCI_ROOT`) stays on the EBS root
 * volume even where nodeadm's `localStorage: RAID0` moves kubelet and containerd onto the
 * instance-store NVMe, so the root volume's throughput bounds the unpack: AWS documents that
 * below about 600 MiB/s of root-volume throughput the parallel pull is slower than the default
 * one (its own benchmark used gp3 at 1,000 MiB/s and 16,000 IOPS). Shared by the stack
 * (infra/gpu-node-groups.ts) and the policy pack (`fast-image-pull-root-throughput`).
 */

/** Where the SOCI snapshotter keeps its content: on the EBS root volume (not moved by `localStorage`). */
export const SOCI_ROOT = "/var/lib/soci-snapshotter-grpc";

/** Below this root-volume throughput (MiB/s) AWS finds parallel pull slower than the default pull. */
export const FAST_PULL_MIN_ROOT_MIBPS = 600;

/** The GPU nodes' root volume with fast pull on: gp3 at AWS's benchmark figures (gp3's maximum throughput). */
export const FAST_PULL_ROOT_VOLUME = Object.freeze({ throughput: 1000, iops: 16000 });

/** gp3 without provisioned extras: what a root volume gets when it sets neither throughput nor IOPS. */
export const GP3_BASELINE = Object.freeze({ throughput: 125, iops: 3000 });

/** The root device of the AL2023 EKS AMIs. */
export const AL2023_ROOT_DEVICE = "/dev/xvda";

/**
 * True when nodeadm user data (plain text, MIME multipart or not) turns the `FastImagePull`
 * feature gate on: `FastImagePull: true` in YAML (and YAML 1.1's `yes`/`on`, which a YAML 1.1
 * parser reads as true) or `"FastImagePull": true` in JSON.
 */
export function enablesFastImagePull(userData: string): boolean {
  return /\bFastImagePull"?\s*:\s*(true|True|TRUE|yes|Yes|on|On)\b/.test(userData);
}
