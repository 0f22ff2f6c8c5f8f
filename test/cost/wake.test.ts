/** `llm-ha cost` states what a standby wake moves onto each GPU node: bytes and time, with the figures behind them. */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import type { CostReport } from "../../infra/cost/estimate";
import { paramsFromName, weightBytes, WAKE_ASSUMPTIONS } from "../../infra/cost/wake";
import { main } from "../../lab/cli";
import { runInProcess } from "../support/in-process";

const ROOT = path.resolve(__dirname, "..", "..");
const cost = (args: string[]) => runInProcess(main, ["cost", ...args], { env: { COLUMNS: undefined }, cwd: ROOT });

describe("llm-ha cost: the wake path", () => {
  it("reads the model's size from its name (16-bit weights)", () => {
    expect(paramsFromName("meta-llama/Llama-3.1-70B-Instruct")).toBe(70);
    expect(paramsFromName("Qwen/Qwen2.5-7B-Instruct")).toBe(7);
    expect(paramsFromName("Qwen/Qwen2.5-0.5B")).toBe(0.5);
    expect(paramsFromName("org/some-model")).toBeNull();
    expect(weightBytes("meta-llama/Llama-3.1-70B-Instruct")).toBe(140e9);
  });

  it("prod: the image from the stack's ECR, the weights streamed from S3; bytes and time per node, against the hub", async () => {
    const { code, stdout } = await cost(["--stack", "prod", "-o", "wide", "--month", "2026-12"]);
    expect(code, stdout).toBe(0);
    // 10 GB image + 140 GB weights; 50 s for the image at 200 MB/s, 140 GB / (32 × 85 MB/s) = 51 s.
    expect(stdout).toContain("Wake, per woken GPU node: 150 GB pulled, about 1.7 min before vLLM's own start-up (CUDA graphs, warm-up); from the hub it would be about 24.2 min.");
    expect(stdout).toMatch(/ {2}image docker\.io\/vllm\/vllm-openai@sha256:c1c9f6fd5c10…: 10 GB from the stack's ECR pull-through cache, in the region/);
    // The pull path (llm-ha:gpuFastImagePull, on by default), at the same conservative rate: no speed-up is credited.
    expect(stdout).toContain("at 200 MB/s (assumed: vLLM's CUDA image is about 10 GB compressed; read yours with crane manifest; assumed for ECR in the region, conservative:");
    expect(stdout).toContain("a practice wake (llm-ha:practiceWake) measures the real one).");
    expect(stdout).toContain("  image pull: SOCI parallel pull (nodeadm FastImagePull: layers fetched in chunks and unpacked concurrently) onto a gp3 root volume at 1,000 MiB/s and 16,000 IOPS.");
    expect(stdout).toContain("weights meta-llama/Llama-3.1-70B-Instruct: 140 GB (70 B parameters × 2 bytes (bf16), from the model's name) streamed from s3://llm-ha-stand-in-weights/prod, ~51 s at 2,720 MB/s (32 S3 connections (RUNAI_STREAMER_CONCURRENCY) × 85 MB/s: AWS's S3 performance guidelines: one concurrent request for each 85–90 MB/s)");
    // The standby AZ (us-east-1c): 4 a100 + 2 h100 nodes at full redundancy.
    expect(stdout).toMatch(/A standby wake starts \d+ node\(s\): [\d,.]+ GB in all, read in parallel\./);
    const json = await cost(["--stack", "prod", "--json", "--month", "2026-12"]);
    const r = JSON.parse(json.stdout) as CostReport;
    expect(r.wake).toMatchObject({ bytesPerNode: 150e9, image: { fastPull: true, seconds: 50 }, weights: { from: "s3-stream", bytes: 140e9, mbps: 32 * WAKE_ASSUMPTIONS.s3MBpsPerConnection } });
  });

  it("dev: the weights from the hub through NAT, at the stated hub figure, no comparison line", async () => {
    const { code, stdout } = await cost(["--stack", "dev", "-o", "wide", "--month", "2026-12"]);
    expect(code, stdout).toBe(0);
    // Qwen2.5-7B: 14 GB at 100 MB/s = 140 s, + 50 s for the image.
    expect(stdout).toContain("Wake, per woken GPU node: 24 GB pulled, about 3.2 min before vLLM's own start-up (CUDA graphs, warm-up).");
    expect(stdout).toContain("downloaded from the Hugging Face hub through the NAT gateway, ~2.3 min at 100 MB/s (an assumption: Hugging Face publishes no throughput figure");
  });

  it("prod with llm-ha:gpuFastImagePull false: containerd's default pull onto a baseline gp3 root, the same planning rate", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "llmha-wake-"));
    try {
      fs.copyFileSync(path.join(ROOT, "Pulumi.yaml"), path.join(dir, "Pulumi.yaml"));
      const file = path.join(dir, "Pulumi.prod.yaml");
      fs.writeFileSync(file, fs.readFileSync(path.join(ROOT, "Pulumi.prod.yaml"), "utf8").trimEnd() + "\n  llm-ha:gpuFastImagePull: false\n");
      const { code, stdout } = await cost(["--stack", file, "-o", "wide", "--month", "2026-12"]);
      expect(code, stdout).toBe(0);
      expect(stdout).toContain("  image pull: containerd's default pull (llm-ha:gpuFastImagePull false) onto a gp3 root volume at 125 MiB/s and 3,000 IOPS, gp3's baseline (SOCI parallel pull would need ≥ 600 MiB/s).");
      expect(stdout).not.toContain("SOCI parallel pull (nodeadm FastImagePull");
      expect(stdout).toContain("Wake, per woken GPU node: 150 GB pulled, about 1.7 min before vLLM's own start-up");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
