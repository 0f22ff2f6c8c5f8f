/**
 * Long generations on a real HAProxy, scaled down (a 3 s non-streaming generation): the
 * server timeout is the setting that allows it (2 s cuts it with a 504, 4 s serves it), the
 * production default allows 600 s, and a client that goes away stops the server's work at
 * once (`option abortonclose`).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { HaproxyHandle } from "../../lab/engines/haproxy";
import { renderHaproxyConfig } from "../../contracts/haproxy-config";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { answer, fakeServer, send, startL1, staticServer, waitStatus, type FakeServer } from "./fixtures";

const GENERATION_MS = 3000;
let hp: HaproxyHandle | undefined;
let server: FakeServer | undefined;
afterEach(async () => {
  await hp?.stop();
  hp = undefined;
  await server?.close();
  server = undefined;
});

async function l1(generationMs: number, timeoutServerMs?: number): Promise<string> {
  server = await fakeServer("g1", answer(200, generationMs));
  const l = await startL1({ local: [staticServer(server, await freePort())] }, { tuning: timeoutServerMs === undefined ? undefined : { timeoutServerMs, timeoutClientMs: timeoutServerMs } });
  hp = l.hp;
  await waitStatus(hp, ["g1"], /^UP$/);
  return `${l.url}/v1/completions`;
}

describe("L1 timeouts on a real HAProxy", () => {
  it("a generation longer than the server timeout gets a 504", async () => {
    const r = await send(await l1(GENERATION_MS, 2000), { body: "{}" });
    expect(r.status).toBe(504);
    expect(r.ms).toBeLessThan(GENERATION_MS);
  });

  it("with the timeout raised past it, the generation is served", async () => {
    const r = await send(await l1(GENERATION_MS, 4000), { body: "{}" });
    expect(r.status).toBe(200);
    expect(r.ms).toBeGreaterThanOrEqual(GENERATION_MS - 50);
  });

  it("by default the proxy waits 600 s for a generation, on both sides", () => {
    const cfg = renderHaproxyConfig({ proxies: [{ name: "l1", bind: "127.0.0.1:1", health: "agent", servers: { kind: "static", local: [{ name: "g", address: "127.0.0.1", port: 2, agentPort: 3, httpPort: 4 }], backup: [] } }] });
    expect(cfg).toContain("  timeout server 600000ms\n");
    expect(cfg).toContain("  timeout client 600000ms\n");
  });

  it("a client that goes away stops the server's work promptly", async () => {
    const url = await l1(10_000);
    const ac = new AbortController();
    const pending = send(url, { body: "{}", signal: ac.signal, timeoutMs: 15_000 });
    await waitFor("the request reached the server", async () => server!.hits.length === 1, { timeoutMs: 5000, everyMs: 10 });
    await sleep(200);
    const abortedAt = Date.now();
    ac.abort();
    await pending;
    await waitFor("the server saw the abort", async () => server!.aborts.length === 1, { timeoutMs: 3000, everyMs: 10 });
    const lag = Date.now() - abortedAt;
    process.stderr.write(`[l1 timeouts] client abort reached the server after ${lag} ms\n`);
    expect(lag).toBeLessThan(500);
  });
});
