/**
 * Per-tenant token budgets at L4: the paid providers get the client's body as it is, so each
 * tenant's `max_tokens × n` is counted against its budget per minute; past it `429` with a
 * `Retry-After` that holds (refused requests are not counted, a request no provider answered
 * is given back), and other tenants are not affected. A real `llm-ha fallback` and a fake provider.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFallback, type RunningFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { requestTokens, TenantTokenBudget } from "../../agent/src/edge/fallback/budget";
import { captureLogger, chatResponse, fakeHttp, json, type FakeHttp } from "./helpers";

describe("the token budget itself", () => {
  it("counts max_tokens × n, refuses past the window's budget without counting the refusal, and starts over with the next window", () => {
    let now = 60_000 * 10 + 15_000;
    const b = new TenantTokenBudget(1000, 60_000, () => now);
    expect(requestTokens({ max_tokens: 300, n: 2 })).toBe(600);
    expect(requestTokens({ max_completion_tokens: 10 })).toBe(10);
    expect(requestTokens({})).toBe(4096);
    expect(b.charge("a", 600).ok).toBe(true);
    for (let i = 0; i < 5; i++) {
      const r = b.charge("a", 600);
      expect(r).toEqual({ ok: false, retryAfterS: 45, tooLarge: false });
    }
    expect(b.charge("a", 400).ok).toBe(true);
    expect(b.charge("b", 1000).ok).toBe(true);
    expect(b.charge("c", 1001)).toMatchObject({ ok: false, tooLarge: true });
    now += 45_000;
    expect(b.charge("a", 1000).ok).toBe(true);
    const r = b.charge("d", 700);
    expect(r.ok).toBe(true);
    if (r.ok) r.release();
    expect(b.charge("d", 1000).ok).toBe(true);
  });
});

describe("llm-ha fallback with a token budget per tenant", () => {
  let provider: FakeHttp;
  let fb: RunningFallback;
  let base: string;
  const dir = mkdtempSync(join(tmpdir(), "llmha-budget-"));

  beforeAll(async () => {
    provider = await fakeHttp((_req, body, res) => {
      if (JSON.stringify(body).includes("fail")) return json(res, 500, { error: { message: "down" } });
      json(res, 200, chatResponse("paid answer", String(body.model)));
    });
    writeFileSync(join(dir, "key"), "provider-key\n");
    writeFileSync(join(dir, "providers.json"), JSON.stringify([{ name: "paid", url: `${provider.url}/v1`, priority: 1, timeoutMs: 2000, models: { m: "m-up" }, keyFile: join(dir, "key"), failureThreshold: 100 }]));
    const cfg = loadFallbackConfig(
      ["--port", "0", "--host", "127.0.0.1", "--metrics-addr", "off", "--cluster", "bud", "--models", "m", "--providers-file", join(dir, "providers.json"), "--upstream-when", "always", "--tenant-tokens-per-min", "1000"],
      {},
    );
    fb = await runFallback(cfg, { log: captureLogger().log });
    base = `http://127.0.0.1:${fb.port}`;
  }, 30_000);

  afterAll(async () => {
    await fb?.close();
    await provider?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const ask = (tenant: string, maxTokens: number, n = 1, content = "hi"): Promise<Response> =>
    fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-tenant": tenant }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content }], max_tokens: maxTokens, n }) });

  it("answers 429 with Retry-After past a tenant's budget, sends the provider nothing more, and leaves other tenants alone", async () => {
    // The whole test within one minute's window (a turn would start the budget over).
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 5000) await new Promise((r) => setTimeout(r, left + 50));
    const before = provider.seen.length;
    // A provider failure is given back: it does not spend the budget.
    expect((await ask("acme", 500, 1, "fail please")).status).toBe(503);
    expect((await ask("acme", 300, 2)).status).toBe(200);
    const refused = await ask("acme", 300, 2);
    expect(refused.status).toBe(429);
    const body = (await refused.json()) as { error: { code: string } };
    expect(body.error.code).toBe("token_budget_exceeded");
    const after = Number(refused.headers.get("retry-after"));
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(60);
    // What is left of the minute still fits.
    expect((await ask("acme", 400)).status).toBe(200);
    expect((await ask("acme", 1)).status).toBe(429);
    expect((await ask("other", 1000)).status).toBe(200);
    expect((await ask("big", 1001)).status).toBe(400);
    expect(provider.seen.length - before).toBe(4);
  });
});
