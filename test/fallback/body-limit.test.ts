/**
 * A refused body always gets its status: a 10 MB body against a 1 MiB limit is
 * answered 413, complete, to the `openai` SDK, to a plain `node:http` client and to curl, and
 * the connection then closes cleanly (the rest of the body is read and dropped, bounded).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { captureLogger } from "./helpers";

const TEN_MB = 10 * 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "llmha-413-"));
let fb: RunningFallback;
let base: string;
const bigBody = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(TEN_MB) }] });

beforeAll(async () => {
  const cfg = loadFallbackConfig(["--port", "0", "--host", "127.0.0.1", "--metrics-addr", "off", "--cluster", "b", "--models", "m"], {});
  fb = await runFallback(cfg, { log: captureLogger().log });
  base = `http://127.0.0.1:${fb.port}`;
  writeFileSync(join(dir, "big.json"), bigBody);
}, 30_000);

afterAll(async () => {
  await fb?.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A plain `node:http` POST of the whole body, at once or at a network's pace (256 KiB every
 * 5 ms): the status and body it read and any socket error, once the request is closed — an
 * EPIPE or a reset after the answer is a failure too (the connection did not close cleanly).
 */
function nodeHttp(body: string, paced = false): Promise<{ status?: number; text?: string; error?: string }> {
  return new Promise((resolve) => {
    const out: { status?: number; text?: string; error?: string } = {};
    const req = request(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      out.status = res.statusCode;
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString("utf8")));
      res.on("end", () => (out.text = text));
      res.on("error", (err) => (out.error ??= err.message));
    });
    req.on("error", (err) => (out.error ??= (err as NodeJS.ErrnoException).code ?? err.message));
    req.on("close", () => setTimeout(() => resolve(out), 50));
    if (!paced) return void req.end(body);
    const buf = Buffer.from(body);
    let at = 0;
    const step = (): void => {
      if (req.destroyed) return;
      const next = Math.min(buf.length, at + 256 * 1024);
      req.write(buf.subarray(at, next));
      at = next;
      if (at < buf.length) setTimeout(step, 5);
      else req.end();
    };
    step();
  });
}

describe("413 for a 10 MB body", () => {
  it("reaches a node:http client, complete, every time, and the connection closes without an error", async () => {
    for (const paced of [false, true, false, true]) {
      const r = await nodeHttp(bigBody, paced);
      expect(r.error).toBeUndefined();
      expect(r.status).toBe(413);
      expect(JSON.parse(r.text ?? "{}")).toMatchObject({ error: { code: "body_too_large" } });
    }
  }, 60_000);

  it("reaches the openai SDK as a 413 (not a connection error), every time", async () => {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "k", maxRetries: 0 });
    for (let i = 0; i < 3; i++) {
      const err = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x".repeat(TEN_MB) }] }).then(() => null, (e: unknown) => e);
      expect(err).toMatchObject({ status: 413 });
    }
  }, 60_000);

  it("reaches curl, with and without Expect: 100-continue", async () => {
    for (const expect100 of [true, false]) {
      const args = ["-sS", "-o", "-", "-w", "\n%{http_code}", "-H", "content-type: application/json", "--data-binary", `@${join(dir, "big.json")}`, `${base}/v1/chat/completions`];
      if (!expect100) args.unshift("-H", "Expect:");
      // Not spawnSync: the fallback answers from this process's event loop.
      const out = await promisify(execFile)("curl", args, { encoding: "utf8", timeout: 30_000, maxBuffer: 1 << 20 });
      const lines = out.stdout.trim().split("\n");
      expect(lines.at(-1)).toBe("413");
      expect(out.stdout).toContain("body_too_large");
    }
  }, 60_000);

  it("a body that declares no length (chunked) and runs over is refused the same way", async () => {
    const r = await new Promise<{ status?: number; error?: string }>((resolve) => {
      const req = request(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode }));
      });
      req.on("error", (err) => resolve({ error: (err as NodeJS.ErrnoException).code }));
      for (let i = 0; i < 10; i++) req.write("x".repeat(1024 * 1024));
      req.end();
    });
    expect(r).toEqual({ status: 413 });
  }, 30_000);
});
