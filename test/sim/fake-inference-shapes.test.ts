/**
 * The fake inference server under real request shapes: prompts of 200 KB, generation time that
 * grows with `max_tokens`, OpenAI streams (raw SSE and through the official `openai` client), a
 * client leaving mid-stream, and the query of death (in a test and as a process).
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { OpenAI } from "openai";
import { describe, expect, it } from "vitest";
import { parseFakeInferenceArgs, QUERY_OF_DEATH_EXIT_CODE, QUERY_OF_DEATH_MARKER } from "../../lab/sim/fake-inference";
import { failure, fakeServers, MODEL } from "./helpers";

const { fake, track } = fakeServers({ latencyMs: 0 });

async function post(url: string, body: unknown, timeoutMs = 5000): Promise<{ status: number; text: string; ms: number; type: string | null }> {
  const t = Date.now();
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  return { status: r.status, text: await r.text(), ms: Date.now() - t, type: r.headers.get("content-type") };
}

/** Reads a stream's server-sent events with the time each arrived (ms after the request). */
async function events(url: string, body: unknown): Promise<{ t: number; data: string }[]> {
  const t0 = Date.now();
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(r.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const out: { t: number; data: string }[] = [];
  let buf = "";
  for await (const part of r.body!) {
    buf += Buffer.from(part).toString("utf8");
    for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      expect(ev.startsWith("data: ")).toBe(true);
      out.push({ t: Date.now() - t0, data: ev.slice(6) });
    }
  }
  expect(buf).toBe("");
  return out;
}

/** How a request on a fresh connection fails (`ECONNREFUSED`, `ECONNRESET`…), or "answered". */
describe("fake inference: request shapes", () => {
  it("takes prompts of 200 KB, in completions and in chat messages", async () => {
    const f = await fake();
    const prompt = "x".repeat(200 * 1024);
    const c = await post(`${f.url}/v1/completions`, { model: MODEL, prompt, max_tokens: 1 });
    expect(c.status).toBe(200);
    expect(JSON.parse(c.text).usage.prompt_tokens).toBe(50 * 1024);
    const chat = await post(`${f.url}/v1/chat/completions`, { model: MODEL, messages: [{ role: "user", content: prompt }], max_tokens: 1 });
    expect(chat.status).toBe(200);
  });

  it("takes the base latency for the first token and tokenMs for each further one", async () => {
    // Timers never fire early, so the lower bound is exact. The upper bounds only say "without the
    // 30 × 100 ms of further tokens" (3 s), with room for a loaded machine: a 250 ms bound over
    // 30 × 10 ms failed in CI at 790 ms beside other suites.
    const f = await fake({ tokenMs: 100 });
    expect((await post(`${f.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: 1 })).ms).toBeLessThan(2000);
    const long = await post(`${f.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: 31 });
    expect(long.ms).toBeGreaterThanOrEqual(2995);
    expect(JSON.parse(long.text).usage.completion_tokens).toBe(31);
    await f.setMode({ tokenMs: 0 });
    expect((await post(`${f.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: 31 })).ms).toBeLessThan(2000);
  });

  it("streams completions as text_completion chunks over time, then the finish reason, the usage and [DONE]", async () => {
    const f = await fake({ tokenMs: 20 });
    const ev = await events(`${f.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: 10, stream: true, stream_options: { include_usage: true } });
    expect(ev.at(-1)!.data).toBe("[DONE]");
    const chunks = ev.slice(0, -1).map((e) => JSON.parse(e.data));
    expect(chunks).toHaveLength(12);
    expect(chunks[0]).toMatchObject({ object: "text_completion", model: MODEL, choices: [{ index: 0, text: " ok", finish_reason: null }] });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[10].choices[0]).toMatchObject({ text: "", finish_reason: "length" });
    expect(chunks[11]).toMatchObject({ choices: [], usage: { completion_tokens: 10, prompt_tokens: 1 } });
    // The tokens arrive over time, not in one piece: the first early, the last ~9 × 20 ms later.
    expect(ev[9].t - ev[0].t).toBeGreaterThanOrEqual(150);
    expect(f.stats()).toMatchObject({ served: 1, streamed: 1, inFlight: 0, generationTokens: 10 });
  });

  it("streams chat through the official openai client: the role, one content delta a token, then finish_reason", async () => {
    const f = await fake({ tokenMs: 5 });
    const client = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: "none", maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 8, stream: true });
    const deltas: string[] = [];
    let role: string | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      role ??= c.delta.role;
      if (c.delta.content) deltas.push(c.delta.content);
      finish = c.finish_reason ?? finish;
    }
    expect(role).toBe("assistant");
    expect(deltas.join("")).toBe(" ok".repeat(8));
    expect(finish).toBe("length");
    const whole = await client.completions.create({ model: MODEL, prompt: "y".repeat(64 * 1024), max_tokens: 3 });
    expect(whole.choices[0].text).toBe(" ok ok ok");
  });

  it("counts a client that leaves mid-stream as failed and stops sending", async () => {
    const f = await fake({ tokenMs: 50 });
    const ac = new AbortController();
    const r = await fetch(`${f.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 100, stream: true }),
      signal: ac.signal,
    });
    const reader = r.body!.getReader();
    await reader.read();
    ac.abort();
    await new Promise((res) => setTimeout(res, 150));
    expect(f.stats()).toMatchObject({ served: 0, failed: 1, inFlight: 0, streamed: 1 });
  });

  it("wedged holds a stream before its headers; error modes answer before any stream starts", async () => {
    const f = await fake({ mode: "error5xx" });
    expect((await post(`${f.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: 3, stream: true })).status).toBe(500);
    await f.setMode("wedged");
    await expect(post(`${f.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: 3, stream: true }, 300)).rejects.toThrow();
  });
});

describe("fake inference: query of death", () => {
  it("a prompt with the marker kills the server: the request fails, both ports close", async () => {
    const f = await fake();
    const qod = post(`${f.url}/v1/chat/completions`, { model: MODEL, messages: [{ role: "user", content: `a ${QUERY_OF_DEATH_MARKER} b` }], max_tokens: 1 });
    await expect(qod).rejects.toThrow();
    expect(await failure(f.url, "/health")).toBe("ECONNREFUSED");
    expect(await failure(f.adminUrl, "/state")).toBe("ECONNREFUSED");
    expect(f.state().listening).toBe(false);
  });

  it("serves the marker like any prompt when the switch is off", async () => {
    const f = await fake({ queryOfDeath: false });
    expect((await post(`${f.url}/v1/completions`, { model: MODEL, prompt: QUERY_OF_DEATH_MARKER, max_tokens: 1 })).status).toBe(200);
    await f.setMode({ queryOfDeath: true });
    await expect(post(`${f.url}/v1/completions`, { model: MODEL, prompt: QUERY_OF_DEATH_MARKER, max_tokens: 1 })).rejects.toThrow();
  });

  it("takes --token-ms and --query-of-death on the command line", () => {
    expect(parseFakeInferenceArgs(["--token-ms", "7", "--query-of-death", "off"])).toMatchObject({ tokenMs: 7, queryOfDeath: false });
    expect(() => parseFakeInferenceArgs(["--query-of-death", "maybe"])).toThrow(/on or off/);
    expect(parseFakeInferenceArgs(["--host", "127.1.0.5"])).toMatchObject({ host: "127.1.0.5" });
    expect(() => parseFakeInferenceArgs(["--host", "node-1"])).toThrow(/--host must be an IP address/);
  });

  it("listens on the address it is given: two nodes share ports on their own addresses (pods behind a headless Service)", async () => {
    const a = await fake({ host: "127.1.0.1" });
    const b = await fake({ host: "127.1.0.2", port: a.port, adminPort: a.adminPort });
    expect(a.url).toBe(`http://127.1.0.1:${a.port}`);
    expect(b.url).toBe(`http://127.1.0.2:${a.port}`);
    for (const f of [a, b]) expect((await fetch(`${f.url}/v1/models`)).status).toBe(200);
    expect(await failure(`http://127.0.0.1:${a.port}`, "/v1/models")).toBe("ECONNREFUSED");
  });

  it("as a process it exits at once with its code and says why", async () => {
    const entry = resolve(__dirname, "../../lab/sim/fake-inference.ts");
    const child = spawn(process.execPath, ["--import", "tsx", entry, "--port", "0", "--model", MODEL], { stdio: ["ignore", "pipe", "pipe"] });
    track(child);
    let err = "";
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
    const { port } = JSON.parse(line) as { port: number };
    const exited = once(child, "exit");
    await expect(post(`http://127.0.0.1:${port}/v1/completions`, { model: MODEL, prompt: `x ${QUERY_OF_DEATH_MARKER}`, max_tokens: 1 })).rejects.toThrow();
    expect((await exited)[0]).toBe(QUERY_OF_DEATH_EXIT_CODE);
    expect(err).toContain("query of death");
  });
});
