import { describe, expect, it } from "vitest";
import { ModelListCache } from "../../agent/src/node/sources/model-list";
import type { HttpAnswer, Send } from "../../agent/src/node/sources/inference";

/** A server stand-in that counts what it is asked. */
function counting(status = 200): { send: Send; asked: string[] } {
  const asked: string[] = [];
  const send: Send = async (url) => {
    asked.push(url);
    return { status, text: `{"data":[{"id":"m"}]}`, headers: {} } as unknown as HttpAnswer;
  };
  return { send, asked };
}

describe("the model list kept between checks", () => {
  it("answers the list from the kept one until it is forgotten or too old; health and POSTs always go out", async () => {
    let now = 0;
    const c = new ModelListCache("vllm", 10_000, () => now);
    const s = counting();
    const send = c.wrap(s.send);
    for (let i = 0; i < 5; i++) {
      await send("http://127.0.0.1:8000/health", 1000);
      await send("http://127.0.0.1:8000/v1/models", 1000);
      now += 1000;
    }
    expect(s.asked.filter((u) => u.endsWith("/health"))).toHaveLength(5);
    expect(s.asked.filter((u) => u.endsWith("/v1/models"))).toHaveLength(1);
    c.forget();
    await send("http://127.0.0.1:8000/v1/models", 1000);
    expect(s.asked.filter((u) => u.endsWith("/v1/models"))).toHaveLength(2);
    now += 10_000;
    await send("http://127.0.0.1:8000/v1/models", 1000);
    expect(s.asked.filter((u) => u.endsWith("/v1/models"))).toHaveLength(3);
    await send("http://127.0.0.1:8000/v1/completions", 1000, { prompt: "x" });
    await send("http://127.0.0.1:8000/v1/completions", 1000, { prompt: "x" });
    expect(s.asked.filter((u) => u.endsWith("/v1/completions"))).toHaveLength(2);
  });

  it("keeps only a 200, and nothing for a generic OpenAI server (its check is the list: each check must reach it)", async () => {
    const bad = counting(503);
    const c = new ModelListCache("vllm", 10_000, () => 0);
    await c.wrap(bad.send)("http://h/v1/models", 1000);
    await c.wrap(bad.send)("http://h/v1/models", 1000);
    expect(bad.asked).toHaveLength(2);
    const o = counting();
    const openai = new ModelListCache("openai", 10_000, () => 0).wrap(o.send);
    await openai("http://h/v1/models", 1000);
    await openai("http://h/v1/models", 1000);
    expect(o.asked).toHaveLength(2);
    // TGI's list is /info.
    const t = counting();
    const tgi = new ModelListCache("tgi", 10_000, () => 0).wrap(t.send);
    await tgi("http://h/info", 1000);
    await tgi("http://h/info", 1000);
    expect(t.asked).toHaveLength(1);
  });

  it("a check stands on a probe answered within the period, the server ready and the list kept; not otherwise", async () => {
    let now = 50_000;
    const c = new ModelListCache("vllm", 10_000, () => now);
    const ready = { seq: 1, at: now, value: { kind: "ready" as const, served: ["m"] } };
    const ok = (at: number) => ({ seq: 2, at, value: { kind: "ok" as const, latencyMs: 20 } });
    expect(c.answeredWithin({ model: ready, probe: ok(now) }, now, 1000)).toBe(false); // no list kept yet
    await c.wrap(counting().send)("http://h/v1/models", 1000);
    expect(c.answeredWithin({ model: ready, probe: ok(now - 200) }, now, 1000)).toBe(true);
    expect(c.answeredWithin({ model: ready, probe: ok(now - 1500) }, now, 1000)).toBe(false); // no answer this period
    expect(c.answeredWithin({ model: ready, probe: { seq: 3, at: now, value: { kind: "failed", detail: "probe answered 404" } } }, now, 1000)).toBe(false);
    expect(c.answeredWithin({ model: { ...ready, value: { kind: "not-ready", detail: "503" } }, probe: ok(now) }, now, 1000)).toBe(false);
    now += 10_000; // the list too old: the check goes out and reads it again
    expect(c.answeredWithin({ model: ready, probe: ok(now) }, now, 1000)).toBe(false);
  });
});
