import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../agent/src/config/load";
import { freePort, waitFor } from "../../agent/src/util/net";
import { startFakeInference } from "../../lab/sim/fake-inference";
import { SimNode } from "../../lab/sim/sim-node";

/**
 * vLLM's `--api-key` on. The agent reads the key from `LLMHA_INFERENCE_API_KEY_FILE`
 * and sends it on the model check, the probe and the engine metrics; a wrong key is a clear hard
 * reason, never healthy; the key never shows in `/status`, `/readyz` or the log. A
 * password in `LLMHA_INFERENCE_URL` never shows either. Real agent processes, fake vLLM.
 */
const KEY = "sk-llmha-test-Zq8vN3pR7tK2";
const dir = mkdtempSync(join(tmpdir(), "llmha-inference-key-"));
const nodes: SimNode[] = [];

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  rmSync(dir, { recursive: true, force: true });
});

async function node(id: string, keyInFile: string | null, env: Record<string, string> = {}): Promise<SimNode> {
  const keyFile = join(dir, `${id}.key`);
  if (keyInFile !== null) writeFileSync(keyFile, `${keyInFile}\n`, { mode: 0o600 });
  const n = await SimNode.start({
    id,
    az: "az-a",
    dir,
    inferenceApiKey: KEY,
    env: { LLMHA_INTERVAL_MS: "200", LLMHA_WARMUP_STEP_MS: "0", LLMHA_RISE: "1", ...(keyInFile !== null ? { LLMHA_INFERENCE_API_KEY_FILE: keyFile } : {}), ...env },
  });
  nodes.push(n);
  return n;
}

const status = async (n: SimNode): Promise<{ status: string; reasons: { code: string; detail: string }[] }> =>
  (await (await fetch(`${n.agentUrl}/status`)).json()) as { status: string; reasons: { code: string; detail: string }[] };
const shown = async (n: SimNode): Promise<string> =>
  (await (await fetch(`${n.agentUrl}/status`)).text()) + (await (await fetch(`${n.agentUrl}/readyz`)).text()) + readFileSync(join(dir, `${n.id}.log`), "utf8");

describe("the fake vLLM with --api-key answers as vLLM does", () => {
  it("401 {error: Unauthorized} on /v1 routes without the key; /health and /metrics stay open", async () => {
    const fake = await startFakeInference({ apiKey: KEY });
    try {
      expect((await fetch(`${fake.url}/v1/models`)).status).toBe(401);
      expect(await (await fetch(`${fake.url}/v1/models`, { headers: { authorization: "Bearer wrong" } })).json()).toEqual({ error: "Unauthorized" });
      expect((await fetch(`${fake.url}/v1/models`, { headers: { authorization: `bearer ${KEY}` } })).status).toBe(200);
      expect((await fetch(`${fake.url}/health`)).status).toBe(200);
      expect((await fetch(`${fake.url}/metrics`)).status).toBe(200);
    } finally {
      await fake.close();
    }
  });
});

describe("the agent sends the inference API key from a file", () => {
  it("with the server's key: HEALTHY, probes answered, the key nowhere in /status, /readyz or the log", async () => {
    const n = await node("gpu-key-ok", KEY);
    await waitFor("healthy with the key", async () => (await status(n)).status === "HEALTHY", { timeoutMs: 20_000, everyMs: 100 });
    expect(await shown(n)).not.toContain(KEY);
  });

  it("with a wrong key: not healthy, reason INFERENCE_AUTH_REFUSED naming the key file setting", async () => {
    const n = await node("gpu-key-bad", "sk-not-the-key");
    await waitFor("auth refused", async () => (await status(n)).reasons.some((r) => r.code === "INFERENCE_AUTH_REFUSED"), { timeoutMs: 20_000, everyMs: 100 });
    const s = await status(n);
    expect(s.status).not.toBe("HEALTHY");
    expect(s.reasons.find((r) => r.code === "INFERENCE_AUTH_REFUSED")?.detail).toMatch(/401.*LLMHA_INFERENCE_API_KEY_FILE/);
    expect(await shown(n)).not.toContain("sk-not-the-key");
  });

  it("a key rotated in the file is picked up without a restart", async () => {
    const n = await node("gpu-key-rotate", "sk-old-wrong-key");
    await waitFor("auth refused", async () => (await status(n)).reasons.some((r) => r.code === "INFERENCE_AUTH_REFUSED"), { timeoutMs: 20_000, everyMs: 100 });
    writeFileSync(join(dir, "gpu-key-rotate.key"), KEY);
    await waitFor("healthy after rotation", async () => (await status(n)).status === "HEALTHY", { timeoutMs: 20_000, everyMs: 100 });
  });
});

describe("a password in LLMHA_INFERENCE_URL never shows", () => {
  it("reasons, /status, /readyz and the log name the server without the password", async () => {
    const closed = await freePort();
    const n = await node("gpu-url-pw", KEY, { LLMHA_INFERENCE_URL: `http://llmha:url-pass-Xy9w@127.0.0.1:${closed}` });
    await waitFor("a reason naming the server", async () => (await status(n)).reasons.some((r) => r.detail.includes(`127.0.0.1:${closed}`)), { timeoutMs: 20_000, everyMs: 100 });
    expect(await shown(n)).not.toContain("url-pass-Xy9w");
  });

  it("a bad key file stops start-up with a message naming the variable, not the content", () => {
    const f = join(dir, "spaces.key");
    writeFileSync(f, "two words");
    expect(() => parseConfig([], { LLMHA_AZ: "az-a", LLMHA_INFERENCE_API_KEY_FILE: f })).toThrow(/LLMHA_INFERENCE_API_KEY_FILE .*printable characters without spaces/);
    expect(() => parseConfig([], { LLMHA_AZ: "az-a", LLMHA_INFERENCE_API_KEY_FILE: join(dir, "missing.key") })).toThrow(/LLMHA_INFERENCE_API_KEY_FILE .*cannot be read: ENOENT/);
  });
});
