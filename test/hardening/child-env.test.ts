/**
 * nvidia-smi runs with a minimal environment. The stand-in below records the
 * environment it was given; none of the agent's settings or secrets may be in it.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { GpuSource } from "../../agent/src/node/sources/gpu";
import { childEnv } from "../../agent/src/util/child-env";

const dir = mkdtempSync(join(tmpdir(), "llmha-childenv-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const saved = { ...process.env };
afterEach(() => {
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
});

describe("child processes", () => {
  it("nvidia-smi sees PATH and the NVIDIA runtime's variables, not LLMHA_* or AWS settings", async () => {
    process.env.LLMHA_REDIS_URL = "rediss://agent:RedisPw0rd@redis:6379";
    process.env.LLMHA_INFERENCE_URL = "http://svc:InfPw0rd@127.0.0.1:8000";
    process.env.AWS_SECRET_ACCESS_KEY = "AwsS3cret";
    process.env.NVIDIA_VISIBLE_DEVICES = "all";
    const dump = join(dir, "env.txt");
    const fake = join(dir, "nvidia-smi");
    writeFileSync(fake, `#!/bin/sh\nenv > ${dump}\nexit 9\n`);
    chmodSync(fake, 0o755);
    await new GpuSource(fake, 3000).read();
    const seen = readFileSync(dump, "utf8");
    for (const secret of ["RedisPw0rd", "InfPw0rd", "AwsS3cret", "LLMHA_"]) expect(seen).not.toContain(secret);
    expect(seen).toContain("NVIDIA_VISIBLE_DEVICES=all");
    expect(seen).toMatch(/^PATH=/m);
  });

  it("keeps only the allowed names", () => {
    expect(childEnv({ PATH: "/bin", HOME: "/h", LLMHA_X: "1", CUDA_VISIBLE_DEVICES: "0", REDIS_PASSWORD: "p", HF_TOKEN: "t" })).toEqual({ PATH: "/bin", HOME: "/h", CUDA_VISIBLE_DEVICES: "0" });
  });
});
