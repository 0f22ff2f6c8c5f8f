/**
 * The fake inference server's rollout settings: the revision it reports (vLLM `root`, TGI
 * `model_sha`), whether it takes the edge relay's continuation request, and a model load on
 * start; each also through the admin API. The continuation request is the agent's check's, which
 * the relay's planner builds (a change to the relay's shape changes what is checked).
 */
import { describe, expect, it } from "vitest";
import { classifyContinuation, ContinuationCheck, continuationCheckRequest, type ContinuationResult } from "../../agent/src/node/continuation-check";
import { request } from "../../agent/src/node/sources/inference";
import { parseFakeInferenceArgs, setFakeInferenceMode, FakeInferenceAdminError } from "../../lab/sim/fake-inference";
import { testLogger } from "../redis/helpers";
import { failure, fakeServers, MODEL } from "./helpers";

const { fake } = fakeServers();

async function getJson(url: string): Promise<Record<string, unknown>> {
  const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return (await r.json()) as Record<string, unknown>;
}

async function check(kind: "vllm" | "tgi" | "llamacpp", url: string): Promise<ReturnType<typeof classifyContinuation>> {
  const req = continuationCheckRequest(kind, url, MODEL, 3)!;
  return classifyContinuation(await request(req.url, 5000, req.body));
}

describe("fake inference: rollout settings", () => {
  it("vLLM reports the revision as root in /v1/models (the model id without one), and the agent's parser reads it", async () => {
    const f = await fake({ kind: "vllm" });
    expect(((await getJson(`${f.url}/v1/models`)).data as { root: string }[])[0].root).toBe(MODEL);
    await setFakeInferenceMode(f.adminUrl, { revision: "rev-b" });
    expect(((await getJson(`${f.url}/v1/models`)).data as { root: string }[])[0].root).toBe("rev-b");
    expect(f.state().revision).toBe("rev-b");
  });

  it("TGI reports it as model_sha in /info (null without one)", async () => {
    const f = await fake({ kind: "tgi" });
    expect((await getJson(`${f.url}/info`)).model_sha).toBeNull();
    const g = await fake({ kind: "tgi", revision: "abc123" });
    expect((await getJson(`${g.url}/info`)).model_sha).toBe("abc123");
  });

  it("continuation accept: the relay's resume request streams tokens; refuse: 400, and only on that shape", async () => {
    for (const kind of ["vllm", "tgi", "llamacpp"] as const) {
      const f = await fake({ kind });
      expect(await check(kind, f.url)).toMatchObject({ outcome: "ok" });
      await setFakeInferenceMode(f.adminUrl, { continuation: "refuse" });
      const r = await check(kind, f.url);
      expect(r.outcome, kind).toBe("refused");
      expect(r.detail).toMatch(/^400: .*continue_final_message/);
      // A plain chat request still answers: only the continuation is refused.
      const plain = await request(`${f.url}/v1/chat/completions`, 5000, { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
      expect("status" in plain && plain.status).toBe(200);
    }
  });

  it("a server that does not answer is an error, not a refusal", async () => {
    const f = await fake({ kind: "vllm", mode: "error5xx" });
    expect(await check("vllm", f.url)).toMatchObject({ outcome: "error" });
    await setFakeInferenceMode(f.adminUrl, { mode: "refused" });
    expect(await check("vllm", f.url)).toMatchObject({ outcome: "error" });
  });

  it("a load time: loading first (vLLM's port closed), its mode after loadMs", async () => {
    const f = await fake({ kind: "vllm", loadMs: 600, revision: "rev-b" });
    expect(f.state().mode).toBe("loading");
    expect(await failure(f.url, "/health")).toBe("ECONNREFUSED");
    await new Promise((r) => setTimeout(r, 900));
    expect(f.state().mode).toBe("ready");
    expect(((await getJson(`${f.url}/v1/models`)).data as { root: string }[])[0].root).toBe("rev-b");
  });

  it("bad values are refused by name, through the admin API and on the command line", async () => {
    const f = await fake({ kind: "vllm" });
    await expect(setFakeInferenceMode(f.adminUrl, { continuation: "maybe" as never })).rejects.toThrow(FakeInferenceAdminError);
    await expect(setFakeInferenceMode(f.adminUrl, { continuation: "maybe" as never })).rejects.toThrow(/continuation must be one of accept, refuse/);
    await expect(setFakeInferenceMode(f.adminUrl, { revision: "a b" })).rejects.toThrow(/revision must be null or/);
    expect(parseFakeInferenceArgs(["--revision", "rev-b", "--continuation", "refuse", "--load-ms", "500", "--corruption", "drift"])).toMatchObject({
      revision: "rev-b", continuation: "refuse", loadMs: 500, corruption: "drift",
    });
    expect(() => parseFakeInferenceArgs(["--continuation", "no"])).toThrow(/continuation must be one of/);
  });
});

describe("the agent's continuation check against the fake", () => {
  it("reports a refusal at once, an error only when the next check errs too", async () => {
    const f = await fake({ kind: "vllm" });
    const reported: (ContinuationResult | null)[] = [];
    const c = new ContinuationCheck({
      kind: "vllm", baseUrl: f.url, model: () => MODEL, ready: () => true, auth: () => ({}), log: testLogger(), timeoutMs: 3000, confirmMs: 60_000,
      onResult: (x) => void reported.push(x),
    });
    expect(await c.runOnce()).toBe("ok");
    await setFakeInferenceMode(f.adminUrl, { mode: "error5xx" });
    // One error: not reported yet (the last result stands).
    expect(await c.runOnce()).toBe("ok");
    expect(reported).toEqual(["ok"]);
    expect(await c.runOnce()).toBe("error");
    await setFakeInferenceMode(f.adminUrl, { mode: "ready", continuation: "refuse" });
    expect(await c.runOnce()).toBe("refused");
    // A restarted server: no result until it is checked.
    c.serverStarted();
    expect(c.last).toBeNull();
    expect(reported).toEqual(["ok", "error", "refused", null]);
    c.stop();
  });
});
