/**
 * Streams cut and the ones that had to be: the accounting over hand-made timelines,
 * and a real stream cut by its server dying, read with the official `openai` client as the
 * drill's clients read it — the failure names the server that answered.
 */
import { afterEach, describe, expect, it } from "vitest";
import { countCuts, cutHadToBe, type Death } from "../../lab/drill/cuts";
import { isStreamCut, STREAM_CUT, type FailedRequest } from "../../lab/drill/timeline";
import { failureOf, openaiClient, send, ShortAnswerError } from "../../lab/drill/workload";
import { startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";

const cut = (over: Partial<FailedRequest>): FailedRequest => ({ t: 1000, end: 2000, client: "llm-ha-sdk", why: STREAM_CUT, place: { server: "127.1.0.1:8000", via: "127.0.0.2" }, ...over });

describe("cut accounting", () => {
  it("a cut had to be only when its own server or its AZ proxy died while it ran", () => {
    const serverDied: Death[] = [{ t: 1500, server: "127.1.0.1:8000" }];
    expect(cutHadToBe(cut({}), serverDied)).toBe(true);
    // Another server's death, or a death long before or after the stream, does not excuse it.
    expect(cutHadToBe(cut({}), [{ t: 1500, server: "127.1.0.2:8000" }])).toBe(false);
    expect(cutHadToBe(cut({}), [{ t: 9000, server: "127.1.0.1:8000" }])).toBe(false);
    expect(cutHadToBe(cut({}), [{ t: -5000, server: "127.1.0.1:8000" }])).toBe(false);
    // The AZ proxy it went through died (whole-zone loss).
    expect(cutHadToBe(cut({}), [{ t: 1800, via: "127.0.0.2" }])).toBe(true);
    expect(cutHadToBe(cut({}), [{ t: 1800, via: "127.0.0.3" }])).toBe(false);
    // A cut with no place (no header) is never excused.
    expect(cutHadToBe(cut({ place: undefined }), serverDied)).toBe(false);
  });

  it("counts the cuts of a window per client, other failures apart", () => {
    const failures: FailedRequest[] = [
      cut({}),
      cut({ client: "llm-ha-field", place: { server: "127.1.0.9:8000", via: "127.0.0.2" } }),
      cut({ t: 50_000, end: 50_100 }),
      { t: 1200, end: 1300, client: "llm-ha-sdk", why: "HTTP 503" },
      cut({ why: `${STREAM_CUT} (ECONNRESET)` }),
    ];
    const deaths: Death[] = [{ t: 1500, server: "127.1.0.1:8000" }];
    expect(countCuts(failures, null, 0, 10_000, deaths)).toEqual({ cut: 3, hadTo: 2 });
    expect(countCuts(failures, "llm-ha-sdk", 0, 10_000, deaths)).toEqual({ cut: 2, hadTo: 2 });
    expect(countCuts(failures, "llm-ha-field", 0, 10_000, deaths)).toEqual({ cut: 1, hadTo: 0 });
    expect(isStreamCut("HTTP 503")).toBe(false);
  });
});

describe("a real stream cut", () => {
  let fake: FakeInference | null = null;
  afterEach(async () => {
    await fake?.close();
    fake = null;
  });

  it("is a stream cut naming the server that answered, never a retryable connection error", async () => {
    fake = await startFakeInference({ model: "m", tokenMs: 50 });
    const client = openaiClient(fake.url, 10_000);
    const sending = send(client, "m", "chat-stream", "hello", 100, AbortSignal.timeout(10_000)).then(
      () => null,
      (err: unknown) => err,
    );
    // Wait until the stream is sending, then kill the server under it.
    const deadline = Date.now() + 5000;
    while (fake.stats().streaming === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(fake.stats().streaming).toBe(1);
    await fake.close();
    const err = await sending;
    expect(err).toBeInstanceOf(ShortAnswerError);
    const f = failureOf(err);
    expect(isStreamCut(f.why ?? "")).toBe(true);
    expect(f.place).toEqual({ server: `127.0.0.1:${fake.port}`, via: "127.0.0.1" });
  });

  it("a whole stream is no failure, and the server counts no stream after it", async () => {
    fake = await startFakeInference({ model: "m", tokenMs: 1 });
    const { tokens } = await send(openaiClient(fake.url, 10_000), "m", "completion-stream", "hello", 20, AbortSignal.timeout(10_000));
    expect(tokens).toBe(20);
    expect(fake.stats()).toMatchObject({ streamed: 1, streaming: 0 });
  });
});
