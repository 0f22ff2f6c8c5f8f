/**
 * What one standby wake moves onto each woken GPU node before vLLM can serve: the engine image
 * and the model's weights, in bytes, and an estimated time from stated throughputs. The bytes
 * follow the stack's config; the throughputs are planning figures, each with where it comes
 * from, not measurements of this stack.
 */
import { FAST_PULL_MIN_ROOT_MIBPS, FAST_PULL_ROOT_VOLUME, GP3_BASELINE } from "../../contracts/fast-image-pull";
import { splitDigestRef } from "../images";
import type { StackConfig } from "../config";
import { STREAMER_CONCURRENCY } from "../workloads/inference";

/** The planning figures of the estimate, each with its source. */
export const WAKE_ASSUMPTIONS = Object.freeze({
  /** Compressed bytes of the vLLM OpenAI server image (CUDA, PyTorch and vLLM): about 10 GB. */
  imageBytes: 10e9,
  imageSource: "assumed: vLLM's CUDA image is about 10 GB compressed; read yours with crane manifest",
  /**
   * Effective pull of an image from ECR in the region: download, decompress and unpack the layers.
   * Kept for both pull paths: AWS gives no speed-up figure for SOCI parallel pull that would fit
   * this image and node, so the fast path is not credited with one.
   */
  imageMBps: 200,
  imageMBpsSource:
    "assumed for ECR in the region, conservative: unpacking the layers, not the network, bounds a plain pull, and no source gives a figure for " +
    "SOCI parallel pull on this image; a practice wake (llm-ha:practiceWake) measures the real one",
  /** Throughput of one S3 GET connection. */
  s3MBpsPerConnection: 85,
  // docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-guidelines.html ("Horizontal scaling of storage connections").
  s3Source: "AWS's S3 performance guidelines: one concurrent request for each 85–90 MB/s",
  /** Connections of `aws s3 sync` (the CLI's default max_concurrent_requests). */
  syncConnections: 10,
  /** A download from the Hugging Face hub through the NAT gateway. */
  hubMBps: 100,
  hubSource: "an assumption: Hugging Face publishes no throughput figure; time your own huggingface-cli download",
});

export interface WakeCost {
  /**
   * Where the image comes from on a wake, and its bytes (0 when the node already holds it);
   * `pull`: how the node pulls and unpacks it (`llm-ha:gpuFastImagePull`).
   */
  image: { ref: string; from: string; pull: string; fastPull: boolean; bytes: number; seconds: number };
  /** Where the weights come from, and how. */
  weights: { model: string; from: "s3-stream" | "s3-sync" | "hub"; uri: string | null; bytes: number; bytesSource: string; mbps: number; mbpsSource: string; seconds: number };
  /** Per woken node: image + weights. */
  bytesPerNode: number;
  secondsPerNode: number;
  /** The same node with the weights from the hub, for comparison (null when the stack uses the hub). */
  hubSecondsPerNode: number | null;
  /** Nodes one standby wake starts (every standby group at its wake size); 0 without a standby AZ. */
  nodesPerWake: number;
}

/** Parameters in billions read from the model's name (`…-70B-…` → 70), or null. */
export function paramsFromName(model: string): number | null {
  const m = /(?:^|[-_/])(\d+(?:\.\d+)?)[bB](?:$|[-_.])/.exec(model);
  return m ? Number(m[1]) : null;
}

/** Bytes of the weights at 16-bit precision (bf16/fp16: 2 bytes a parameter), or null when the name gives no size. */
export function weightBytes(model: string): number | null {
  const b = paramsFromName(model);
  return b === null ? null : b * 1e9 * 2;
}

/** How a GPU node pulls the image, in words (infra/gpu-node-groups.ts, contracts/fast-image-pull.ts). */
export function imagePull(fastPull: boolean): string {
  const v = fastPull ? FAST_PULL_ROOT_VOLUME : GP3_BASELINE;
  const volume = `a gp3 root volume at ${v.throughput.toLocaleString("en-US")} MiB/s and ${v.iops.toLocaleString("en-US")} IOPS`;
  return fastPull
    ? `SOCI parallel pull (nodeadm FastImagePull: layers fetched in chunks and unpacked concurrently) onto ${volume}`
    : `containerd's default pull (llm-ha:gpuFastImagePull false) onto ${volume}, gp3's baseline (SOCI parallel pull would need ≥ ${FAST_PULL_MIN_ROOT_MIBPS} MiB/s)`;
}

export function wakeCost(cfg: StackConfig, nodesPerWake: number): WakeCost {
  const a = WAKE_ASSUMPTIONS;
  const r = splitDigestRef(cfg.inference.image);
  const imageRef = r ? `${r.repository}@${r.digest.slice(0, 19)}…` : cfg.inference.image;
  const imageBytes = a.imageBytes;
  const fastPull = cfg.gpuFastImagePull;
  const image = {
    ref: imageRef,
    from: "the stack's ECR pull-through cache, in the region (through the VPC's ECR endpoints)",
    pull: imagePull(fastPull),
    fastPull,
    bytes: imageBytes,
    seconds: imageBytes / (a.imageMBps * 1e6),
  };
  const uri = cfg.inference.weightsS3Uri ?? null;
  const from = uri === null ? "hub" : cfg.inference.weightsLoad === "sync" ? "s3-sync" : "s3-stream";
  const bytes = weightBytes(cfg.inference.model) ?? 0;
  const bytesSource = bytes ? `${paramsFromName(cfg.inference.model)} B parameters × 2 bytes (bf16), from the model's name` : "unknown: the model's name gives no parameter count";
  const conns = from === "s3-stream" ? STREAMER_CONCURRENCY : a.syncConnections;
  const mbps = from === "hub" ? a.hubMBps : conns * a.s3MBpsPerConnection;
  const mbpsSource = from === "hub" ? a.hubSource : `${conns} S3 connections (${from === "s3-stream" ? "RUNAI_STREAMER_CONCURRENCY" : "aws s3 sync's default"}) × ${a.s3MBpsPerConnection} MB/s: ${a.s3Source}`;
  const weights = { model: cfg.inference.model, from, uri, bytes, bytesSource, mbps, mbpsSource, seconds: bytes / (mbps * 1e6) } as WakeCost["weights"];
  return {
    image,
    weights,
    bytesPerNode: image.bytes + weights.bytes,
    secondsPerNode: image.seconds + weights.seconds,
    hubSecondsPerNode: from === "hub" ? null : image.seconds + bytes / (a.hubMBps * 1e6),
    nodesPerWake,
  };
}

const gb = (b: number): string => `${(b / 1e9).toLocaleString("en-US", { maximumFractionDigits: 1 })} GB`;
const dur = (s: number): string => (s < 90 ? `${Math.round(s)} s` : `${(s / 60).toLocaleString("en-US", { maximumFractionDigits: 1 })} min`);
const SOURCES = { "s3-stream": "streamed from", "s3-sync": "copied to the node's NVMe from", hub: "downloaded from the Hugging Face hub through the NAT gateway" } as const;

/** The report's lines about a wake (see `renderCost`). */
export function renderWake(w: WakeCost): string[] {
  const a = WAKE_ASSUMPTIONS;
  const where = w.weights.uri ? `${SOURCES[w.weights.from]} ${w.weights.uri}` : SOURCES.hub;
  const out = [
    `Wake, per woken GPU node: ${gb(w.bytesPerNode)} pulled, about ${dur(w.secondsPerNode)} before vLLM's own start-up (CUDA graphs, warm-up)` +
      (w.hubSecondsPerNode !== null ? `; from the hub it would be about ${dur(w.hubSecondsPerNode)}.` : "."),
    `  image ${w.image.ref}: ${gb(w.image.bytes)} from ${w.image.from}, ~${dur(w.image.seconds)} at ${a.imageMBps} MB/s (${a.imageSource}; ${a.imageMBpsSource}).`,
    `  image pull: ${w.image.pull}.`,
    `  weights ${w.weights.model}: ${gb(w.weights.bytes)} (${w.weights.bytesSource}) ${where}, ~${dur(w.weights.seconds)} at ${w.weights.mbps.toLocaleString("en-US")} MB/s (${w.weights.mbpsSource}).`,
  ];
  if (w.nodesPerWake > 0) out.push(`  A standby wake starts ${w.nodesPerWake} node(s): ${gb(w.bytesPerNode * w.nodesPerWake)} in all, read in parallel.`);
  return out;
}

