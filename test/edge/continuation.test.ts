/**
 * The continuation relay (`llm-ha continue`) behind a real HAProxy rendered by the one generator,
 * over fake vLLM servers, driven with the official `openai` package as an application would.
 * Each case kills a server under a request and checks what the application got.
 */
import { request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { startFakeInference } from "../../lab/sim/fake-inference/server";
import { QUERY_OF_DEATH_MARKER, type FakeInference } from "../../lab/sim/fake-inference/settings";
import { ContinuationRelay } from "../../agent/src/edge/continuation/relay";
import { ContinuationMetrics } from "../../agent/src/edge/continuation/metrics";
import type { ContinuationKind } from "../../contracts/continuation";
import { freePort, waitFor } from "../../agent/src/util/net";
import { fakeServer, staticServer, type FakeServer } from "../l1/fixtures";
import { continuationWatchingFetch, undisturbedText } from "../../lab/drill/continued";
import { send } from "../../lab/drill/workload";

interface Stack {
  fakes: FakeInference[];
  client: OpenAI;
  metrics: ContinuationMetrics;
  close(): Promise<void>;
}

const MODEL = "meta-llama/Llama-3.1-8B-Instruct";
let open: Stack | null = null;

afterEach(async () => {
  await open?.close();
  open = null;
});

/** `n` fake servers behind an L1 proxy; with `relay` the completions go through `llm-ha continue`. */
async function stack(n: number, opts: { relay?: boolean; kind?: ContinuationKind; tokenMs?: number; extra?: FakeServer; fakesAsBackup?: boolean; resendDelayMs?: number } = {}): Promise<Stack> {
  const kind = opts.kind ?? "vllm";
  const fakes = await Promise.all(Array.from({ length: n }, () => startFakeInference({ kind: kind === "sglang" ? "vllm" : kind, tokenMs: opts.tokenMs ?? 15, latencyMs: 2 })));
  const servers = await Promise.all(fakes.map(async (f, i) => staticServer({ name: `s${i}`, port: f.port }, await freePort())));
  const extra = opts.extra ? [staticServer({ name: "extra", port: opts.extra.port }, await freePort())] : [];
  // `fakesAsBackup`: the extra server is the AZ's only own server, the fakes another AZ's (used once it is down).
  const rows = opts.fakesAsBackup ? { local: extra, backup: servers } : { local: [...servers, ...extra], backup: [] };
  const bind = `127.0.0.1:${await freePort()}`;
  const metrics = new ContinuationMetrics(kind);
  let relay: ContinuationRelay | null = null;
  let continuation;
  if (opts.relay !== false) {
    const upstreamPort = await freePort();
    relay = new ContinuationRelay({ upstream: { host: "127.0.0.1", port: upstreamPort }, kind, stallMs: 2_000, maxBodyBytes: 1 << 20, metrics, resendDelayMs: opts.resendDelayMs });
    const relayPort = await relay.listen(0, "127.0.0.1");
    continuation = { relay: `127.0.0.1:${relayPort}`, bind: `127.0.0.1:${upstreamPort}` };
  }
  const hp: HaproxyHandle = await startHaproxy({ proxies: [{ name: "l1", bind, health: "agent", continuation, servers: { kind: "static", ...rows } }] });
  const all = rows.local.length + rows.backup.length;
  // With the relay each server is in two backends (straight, and through the relay as HAProxy's SOCKS4 hop), and the relay has a row.
  await waitFor("servers and relay UP", async () => (await hp.stats()).filter((r) => r.status.startsWith("UP")).length === (relay ? 2 * all + 1 : all), { timeoutMs: 10_000, everyMs: 50 });
  const client = new OpenAI({ baseURL: `http://${bind}/v1`, apiKey: "unused", maxRetries: 0, timeout: 20_000 });
  const s: Stack = {
    fakes,
    client,
    metrics,
    async close() {
      await hp.stop();
      await relay?.close();
      await Promise.all(fakes.map((f) => f.close()));
    },
  };
  open = s;
  return s;
}

/** Kills the server streaming now once `after` chunks reached the client. */
function killer(s: Stack, after: number): (i: number) => void {
  let done = false;
  return (i) => {
    if (done || i < after) return;
    const victim = s.fakes.find((f) => f.stats().streaming > 0);
    if (!victim) return;
    done = true;
    void victim.close();
  };
}

async function completionStream(s: Stack, prompt: string, onChunk: (i: number) => void = () => undefined): Promise<{ text: string; ids: Set<string>; finish: string | null; usage: OpenAI.CompletionUsage | undefined }> {
  const stream = await s.client.completions.create({ model: MODEL, prompt, max_tokens: 40, temperature: 0, seed: 7, stream: true, stream_options: { include_usage: true } });
  const out = { text: "", ids: new Set<string>(), finish: null as string | null, usage: undefined as OpenAI.CompletionUsage | undefined };
  let i = 0;
  for await (const c of stream) {
    out.ids.add(c.id);
    if (c.usage) out.usage = c.usage;
    const ch = c.choices[0];
    if (ch) {
      out.text += ch.text;
      if (ch.finish_reason) out.finish = ch.finish_reason;
    }
    onChunk(++i);
  }
  return out;
}

async function chatStream(s: Stack, content: string, onChunk: (i: number) => void = () => undefined, seed: number | null = 7): Promise<{ text: string; ids: Set<string>; finish: string | null }> {
  const stream = await s.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 40, temperature: 0, seed: seed ?? undefined, stream: true });
  const out = { text: "", ids: new Set<string>(), finish: null as string | null };
  let i = 0;
  for await (const c of stream) {
    out.ids.add(c.id);
    const ch = c.choices[0];
    out.text += ch?.delta?.content ?? "";
    if (ch?.finish_reason) out.finish = ch.finish_reason;
    onChunk(++i);
  }
  return out;
}

const outcome = async (m: ContinuationMetrics, o: string): Promise<number> => (await m.outcomes.get()).values.filter((v) => v.labels.outcome === o).reduce((a, v) => a + v.value, 0);

describe("stream continuation at the L1 tier", () => {
  it("a completion stream whose server is killed mid-answer arrives whole: the undisturbed greedy text, one id, usage for the whole answer", async () => {
    const s = await stack(3);
    const calm = await completionStream(s, "Tell me about the sea");
    expect(calm.text.split(" ").length - 1).toBe(40);
    const cut = await completionStream(s, "Tell me about the sea", killer(s, 12));
    expect(s.fakes.filter((f) => !f.state().listening)).toHaveLength(1);
    expect(cut.text).toBe(calm.text);
    expect(cut.ids.size).toBe(1);
    expect(cut.finish).toBe("length");
    expect(cut.usage?.completion_tokens).toBe(40);
    expect(await outcome(s.metrics, "continued")).toBe(1);
  }, 30_000);

  it("counts each completion once by route and stream, whether it streamed, was continued or not JSON at all", async () => {
    const s = await stack(3);
    await completionStream(s, "Tell me about the sea");
    await completionStream(s, "Tell me about the sea", killer(s, 12));
    await s.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 5 });
    // Not JSON: the server's own 400 passes through and nothing is counted (the relay watches JSON completions only).
    const bad = await fetch(`${s.client.baseURL}/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(bad.status).toBe(400);
    const counts = (await s.metrics.requests.get()).values.map((v) => `${v.labels.route}/${v.labels.stream}=${v.value}`).sort();
    expect(counts).toEqual(["chat/false=1", "completions/true=2"]);
    expect(await outcome(s.metrics, "continued")).toBe(1);
  }, 30_000);

  it("a continued stream says so: an SSE comment in the stream and the x-llmha-continued trailer", async () => {
    const s = await stack(3);
    const kill = killer(s, 10);
    const body = JSON.stringify({ model: MODEL, prompt: "Tell me", max_tokens: 30, temperature: 0, seed: 7, stream: true });
    const got = await new Promise<{ text: string; trailers: NodeJS.Dict<string> }>((resolve, reject) => {
      const req = request(`${s.client.baseURL}/completions`, { method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
        let text = "";
        let events = 0;
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          text += d;
          events += d.split("\n\n").length - 1;
          kill(events);
        });
        res.on("end", () => resolve({ text, trailers: res.trailers }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
    expect(got.text).toMatch(/^: x-llmha-continued continue after \d+ tokens$/m);
    expect(got.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(got.trailers["x-llmha-continued"]).toBe("continue");
  }, 30_000);

  it("a chat stream is continued with the partial assistant message (vLLM's continue_final_message)", async () => {
    const s = await stack(3);
    const calm = await chatStream(s, "Write a poem");
    const cut = await chatStream(s, "Write a poem", killer(s, 15));
    expect(s.fakes.filter((f) => !f.state().listening)).toHaveLength(1);
    expect(cut.text).toBe(calm.text);
    expect(cut.ids.size).toBe(1);
    expect(cut.finish).toBe("length");
  }, 30_000);

  it("a kind that cannot continue a chat restarts a greedy seeded answer and skips what was delivered", async () => {
    const s = await stack(3, { kind: "openai" });
    const calm = await chatStream(s, "Write a poem");
    const cut = await chatStream(s, "Write a poem", killer(s, 15));
    expect(cut.text).toBe(calm.text);
    expect(await outcome(s.metrics, "restarted")).toBe(1);
  }, 30_000);

  it("a kind that cannot continue ends a sampled chat answer with a clear error event", async () => {
    const s = await stack(3, { kind: "openai" });
    await expect(chatStream(s, "Write a poem", killer(s, 10), null)).rejects.toThrow(/cannot continue/);
    expect(await outcome(s.metrics, "not_continuable")).toBe(1);
  }, 30_000);

  it("a non-streamed request whose server died before answering is retried once, and says so", async () => {
    const s = await stack(3, { tokenMs: 20 });
    const p = s.client.completions.create({ model: MODEL, prompt: "Hello", max_tokens: 30, temperature: 0, seed: 1 }).withResponse();
    await waitFor("a server generating", async () => s.fakes.some((f) => f.stats().inFlight > 0), { timeoutMs: 5_000, everyMs: 5 });
    await s.fakes.find((f) => f.stats().inFlight > 0)?.close();
    const { data, response } = await p;
    expect(data.choices[0].text.split(" ").length - 1).toBe(30);
    expect(response.headers.get("x-llmha-continued")).toBe("retried");
    expect(await outcome(s.metrics, "retried")).toBe(1);
  }, 30_000);

  it("whole answers that arrive in several reads, several at once, come back intact (each read of the relay's one buffer is copied before the next)", async () => {
    // A server that writes each answer in pieces 10 ms apart: the answers' reads interleave in the relay.
    const pieces = await fakeServer("pieces", (_req, res, body) => {
      const n = Number(/"prompt":"whole (\d+)"/.exec(body.toString())?.[1] ?? 0);
      const text = ` tok${n}`.repeat(500 + 37 * n);
      const json = JSON.stringify({ id: `cmpl-${n}`, object: "text_completion", created: 1, model: MODEL, choices: [{ index: 0, text, finish_reason: "length", logprobs: null }] });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
      // Each piece 10 ms after the one before, from the one before: timers of different lengths set at once
      // do not run in the order they fall due when the loop runs late (a late 20 ms one can run before a 10 ms one).
      const cuts = [0, 0.3, 0.6, 1].map((f) => Math.floor(f * json.length));
      const piece = (i: number): void => {
        if (i === cuts.length - 1) return void res.end();
        res.write(json.slice(cuts[i], cuts[i + 1]));
        setTimeout(() => piece(i + 1), 10);
      };
      piece(0);
    });
    const s = await stack(0, { extra: pieces });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => s.client.completions.create({ model: MODEL, prompt: `whole ${i}`, max_tokens: 16 })));
    expect(answers.map((a) => a.choices[0].text)).toEqual(Array.from({ length: 12 }, (_, i) => ` tok${i}`.repeat(500 + 37 * i)));
    await pieces.close();
  }, 30_000);

  it("a query of death costs at most two servers and ends with an error, not a loop", async () => {
    const s = await stack(3);
    await expect(s.client.completions.create({ model: MODEL, prompt: `boom ${QUERY_OF_DEATH_MARKER}`, max_tokens: 5, stream: true })).rejects.toThrow(/502|failed twice/);
    await new Promise((r) => setTimeout(r, 500));
    expect(s.fakes.filter((f) => !f.state().listening)).toHaveLength(2);
    expect(await outcome(s.metrics, "failed_twice")).toBe(1);
  }, 30_000);

  it("a server that dies while its AZ has no other: the second request waits for the proxy to take it out, and is continued on another AZ's (chaos seed 5)", async () => {
    // Chaos seed 5 at 274 s: gpu-b1 crashed while gpu-b2 was down; the relay asked again at once,
    // the proxy still had gpu-b1 (its only own server) in rotation, sent it there while the
    // process was going away, and the relay took the second failure for a query of death.
    /** A server that streams three tokens and goes away: its stream reset, connections in the next 150 ms accepted and reset, then refused. */
    const dying = async (): Promise<FakeServer> => {
      let gone = false;
      const f: FakeServer = await fakeServer("dying", (_req, res) => {
        if (gone) return void res.socket?.destroy();
        res.writeHead(200, { "content-type": "text/event-stream" });
        const head = { id: "cmpl-d", object: "text_completion", created: 1, model: MODEL };
        for (const t of [" The", " sea", " is"]) res.write(`data: ${JSON.stringify({ ...head, choices: [{ index: 0, text: t, finish_reason: null }] })}\n\n`);
        setTimeout(() => {
          gone = true;
          res.socket?.destroy();
          setTimeout(() => void f.close(), 150);
        }, 30);
      });
      return f;
    };
    const immediate = await stack(1, { extra: await dying(), fakesAsBackup: true, resendDelayMs: 0 });
    await expect(completionStream(immediate, "Tell me about the sea")).rejects.toThrow(/failed twice|query/);
    expect(await outcome(immediate.metrics, "failed_twice")).toBe(1);
    await immediate.close();
    open = null;
    const waiting = await stack(1, { extra: await dying(), fakesAsBackup: true, resendDelayMs: 250 });
    const got = await completionStream(waiting, "Tell me about the sea");
    expect(got.text.slice(0, 40), JSON.stringify(got)).toMatch(/^ The sea is/);
    expect(got.finish).toBe("length");
    expect(await outcome(waiting.metrics, "continued")).toBe(1);
    expect(await outcome(waiting.metrics, "failed_twice")).toBe(0);
  }, 30_000);

  it("a stream emitting tool calls is not continued", async () => {
    const tools = await fakeServer("tools", (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const head = { id: "chatcmpl-t", object: "chat.completion.chunk", created: 1, model: MODEL };
      res.write(`data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: "assistant", tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "f", arguments: "" } }] }, finish_reason: null }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }, finish_reason: null }] })}\n\n`);
      setTimeout(() => res.socket?.destroy(), 50);
    });
    const s = await stack(0, { extra: tools });
    await expect(chatStream(s, "call f")).rejects.toThrow(/tool calls/);
    expect(tools.hits).toHaveLength(1);
    expect(await outcome(s.metrics, "tool_calls")).toBe(1);
    await tools.close();
  }, 30_000);

  it("without the relay the same crash cuts the stream (what the relay removes)", async () => {
    const s = await stack(3, { relay: false });
    await expect(completionStream(s, "Tell me about the sea", killer(s, 12))).rejects.toThrow();
  }, 30_000);
});

describe("the drill's view of a continued stream (lab/drill/continued.ts)", () => {
  it("the SDK client sees the relay's comment through its fetch and the text equals an undisturbed run; a stream not cut is not continued", async () => {
    const s = await stack(3);
    const client = new OpenAI({ baseURL: s.client.baseURL, apiKey: "unused", maxRetries: 0, timeout: 20_000, fetch: continuationWatchingFetch() });
    const prompt = "Tell me about the sea";
    const calm = await send(client, MODEL, "chat-stream", prompt, 40, AbortSignal.timeout(20_000), true);
    expect(calm).toEqual({ tokens: 40, continued: null, exact: true });
    // Kill the server under the stream once it has sent a few chunks.
    const sending = send(client, MODEL, "chat-stream", prompt, 40, AbortSignal.timeout(20_000), true);
    await waitFor("a stream under way", async () => s.fakes.some((f) => f.stats().streaming > 0), { timeoutMs: 5_000, everyMs: 10 });
    await new Promise((r) => setTimeout(r, 150));
    await s.fakes.find((f) => f.stats().streaming > 0)?.close();
    const cut = await sending;
    expect(cut.continued).toMatch(/^continue after \d+ tokens$/);
    expect(cut.exact).toBe(true);
    expect(undisturbedText("chat", prompt, 40)).not.toBe(undisturbedText("chat", `${prompt}!`, 40));
  }, 30_000);
});
