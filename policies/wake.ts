// The wake path: a standby node woken at 3 a.m. pulls its ~10 GB vLLM image from the stack's
// ECR in the region (the pull-through cache of infra/image-cache.ts), by digest, never from
// Docker Hub or another registry across the internet (a rate limit or an outage there would
// stall the failover); and a node that pulls it with SOCI parallel pull (nodeadm's
// FastImagePull gate) has the root-volume throughput that makes that pull faster, not slower.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import { AL2023_ROOT_DEVICE, enablesFastImagePull, FAST_PULL_MIN_ROOT_MIBPS, FAST_PULL_ROOT_VOLUME, GP3_BASELINE, SOCI_ROOT } from "../contracts/fast-image-pull";
import { podSpecOf, WORKLOAD_TYPES } from "./edge";
import { GPU_RESOURCE, LAUNCH_TEMPLATE_TYPE } from "./conventions";
import { list, num, record, str, type Props } from "./props";

/** `<account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>@sha256:<64 hex>`: a private ECR image by digest. */
export const ECR_DIGEST_REF = /^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?\/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$/;

function asksGpu(c: Props | undefined): boolean {
  const res = record(c?.resources);
  const amount = num(record(res?.limits)?.[GPU_RESOURCE]) ?? num(record(res?.requests)?.[GPU_RESOURCE]);
  return amount !== undefined && amount > 0;
}

export const gpuImagesFromEcr: ResourceValidationPolicy = {
  name: "gpu-images-from-ecr",
  description:
    "L2 node tier: every container of a workload that requests GPUs (the vLLM server and its init containers) runs an image from a private ECR registry by digest (<account>.dkr.ecr.<region>.amazonaws.com/…@sha256:…, the stack's pull-through cache): a woken GPU node pulls its ~10 GB image inside the region, never from Docker Hub (10 anonymous pulls an hour per NAT address) or another registry on the internet.",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    if (!WORKLOAD_TYPES.includes(args.type)) args.notApplicable(`Policy only applies to ${WORKLOAD_TYPES.join(", ")}`);
    const spec = podSpecOf(args.type, args.props as Props);
    const all = [...list(spec?.initContainers), ...list(spec?.containers)].map(record);
    if (!all.some(asksGpu)) return;
    for (const c of all) {
      const image = str(c?.image) ?? "";
      if (!ECR_DIGEST_REF.test(image)) {
        reportViolation(
          `${args.name}: container ${str(c?.name) ?? "?"} of a GPU pod runs ${image || "no image"}, not an image of the stack's ECR by digest: a wake would pull it across the internet. Name it through the pull-through cache (infra/images.ts pullRef: <account>.dkr.ecr.<region>.amazonaws.com/<cluster>/docker-hub/…@sha256:…).`,
        );
      }
    }
  },
};

export interface FastImagePullRootThroughputConfig {
  minThroughputMiBps: number;
  rootDeviceName: string;
}

/** The launch template's user data as text: the engine hands over the base64 EC2 takes. */
function userDataText(v: unknown): string | undefined {
  const b64 = str(v);
  return b64 === undefined ? undefined : Buffer.from(b64, "base64").toString("utf8");
}

export const fastImagePullRootThroughput: ResourceValidationPolicy = {
  name: "fast-image-pull-root-throughput",
  description: `L2 node tier: a launch template whose nodeadm user data turns on the FastImagePull feature gate (the SOCI snapshotter's parallel pull, how a woken GPU node pulls its ~10 GB vLLM image) gives its root volume (${AL2023_ROOT_DEVICE} on the AL2023 EKS AMIs) gp3 throughput of at least ${FAST_PULL_MIN_ROOT_MIBPS} MiB/s: the snapshotter's root (${SOCI_ROOT}) stays on that EBS volume even with localStorage RAID0, and AWS documents that below about ${FAST_PULL_MIN_ROOT_MIBPS} MiB/s parallel pull is slower than the default pull, so the wake gets slower, not faster.`,
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      minThroughputMiBps: { type: "integer", minimum: 1, default: FAST_PULL_MIN_ROOT_MIBPS, description: "Least root-volume throughput (MiB/s) for FastImagePull." },
      rootDeviceName: { type: "string", default: AL2023_ROOT_DEVICE, description: "The AMI's root device name." },
    },
  },
  validateResource: (args, reportViolation) => {
    if (args.type !== LAUNCH_TEMPLATE_TYPE) args.notApplicable(`Policy only applies to ${LAUNCH_TEMPLATE_TYPE}`);
    const text = userDataText((args.props as Props).userData);
    if (text === undefined || !enablesFastImagePull(text)) return;
    const { minThroughputMiBps: min, rootDeviceName: root } = args.getConfig<FastImagePullRootThroughputConfig>();
    const fix = `Give ${root} volumeType gp3 with throughput ≥ ${min} (the program sets throughput ${FAST_PULL_ROOT_VOLUME.throughput} and iops ${FAST_PULL_ROOT_VOLUME.iops}), or turn the gate off (llm-ha:gpuFastImagePull false).`;
    const why = `AWS documents that SOCI parallel pull is slower than the default pull below about ${FAST_PULL_MIN_ROOT_MIBPS} MiB/s of root-volume throughput, and the snapshotter's root (${SOCI_ROOT}) stays on the root volume even with localStorage RAID0.`;
    const mapping = list((args.props as Props).blockDeviceMappings).map(record).find((m) => str(m?.deviceName) === root);
    const ebs = record(mapping?.ebs);
    const head = `Launch template ${args.name} enables nodeadm's FastImagePull (SOCI parallel pull)`;
    if (!ebs) {
      reportViolation(`${head} but maps no EBS volume on ${root}: the AMI's root volume keeps its own throughput (gp3's baseline is ${GP3_BASELINE.throughput} MiB/s). ${why} ${fix}`);
      return;
    }
    const type = str(ebs.volumeType);
    if (type !== "gp3") {
      reportViolation(`${head} but its root volume ${root} is ${type ?? "of the AMI's snapshot type"}, not gp3 with a provisioned throughput. ${why} ${fix}`);
      return;
    }
    const throughput = num(ebs.throughput);
    if ((throughput ?? GP3_BASELINE.throughput) < min) {
      const at = throughput === undefined ? `gp3's baseline ${GP3_BASELINE.throughput} MiB/s (throughput unset)` : `${throughput} MiB/s`;
      reportViolation(`${head} but its root volume ${root} has ${at}, below ${min} MiB/s. ${why} ${fix}`);
    }
  },
};
