// The wake path: a standby node woken at 3 a.m. pulls its ~10 GB vLLM image from the stack's
// ECR in the region (the pull-through cache of infra/image-cache.ts), by digest, never from
// Docker Hub or another registry across the internet (a rate limit or an outage there would
// stall the failover).
import type { ResourceValidationPolicy } from "@pulumi/policy";
import { podSpecOf, WORKLOAD_TYPES } from "./edge";
import { GPU_RESOURCE } from "./conventions";
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
