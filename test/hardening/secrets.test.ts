/**
 * On a real agent process: a token in the user part of LLMHA_INFERENCE_URL
 * (`http://svc:TOKEN@host`) or of LLMHA_REDIS_URL (`redis://TOKEN@host`, which redis-cli
 * accepts) appears in no log line and nowhere in /status or /readyz.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { SimNode } from "../../lab/sim/sim-node";
import { waitFor } from "../../agent/src/util/net";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");
const dir = mkdtempSync(join(tmpdir(), "llmha-secrets-"));
let node: SimNode;
let redis: RedisServerHandle;

beforeAll(async () => {
  redis = await startRedisServer();
  node = await SimNode.start({ id: "gpu-sec", az: "az-a", dir, noAgent: true });
});
afterAll(async () => {
  await node?.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("secrets in URLs", () => {
  it("stay out of the logs and /status", async () => {
    const port = new URL(redis.url).port;
    const env = {
      ...node.agentEnv(),
      LLMHA_INFERENCE_URL: `http://svc:InfTok3n@127.0.0.1:${node.inferencePort}`,
      LLMHA_REDIS_URL: `redis://RedTok3n@127.0.0.1:${port}`,
      LLMHA_LOG_LEVEL: "debug",
    };
    const child = spawn(process.execPath, ["--import", "tsx", CLI, "agent"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (b) => (out += b));
    child.stderr.on("data", (b) => (out += b));
    const exited = new Promise((r) => child.once("exit", r));
    try {
      await waitFor("agent /livez", async () => (await fetch(`${node.agentUrl}/livez`, { signal: AbortSignal.timeout(500) })).ok, { timeoutMs: 20_000 });
      await new Promise((r) => setTimeout(r, 2000)); // a few evaluations, Redis errors and all
      const status = await (await fetch(`${node.agentUrl}/status`)).text();
      // /readyz's body names the verdict and its reasons, never the URL's user part.
      const readyz = await (await fetch(`${node.agentUrl}/readyz`)).text();
      for (const secret of ["InfTok3n", "RedTok3n"]) expect(readyz).not.toContain(secret);
      expect(status).toContain("redacted");
      for (const secret of ["InfTok3n", "RedTok3n"]) {
        expect(status).not.toContain(secret);
        expect(out).not.toContain(secret);
      }
      expect(out).toContain("started");
    } finally {
      child.kill("SIGTERM");
      await exited;
    }
  });
});
