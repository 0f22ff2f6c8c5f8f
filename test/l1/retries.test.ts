/**
 * What the L1 proxy replays, on a real HAProxy: a refused request (503) with a long prompt
 * still gets its one retry (the prompt fits in `tune.bufsize`), a request that kills every
 * server it reaches (a query of death) reaches exactly one, and a response that has started
 * is never replayed (a retry happens before the first byte only).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { HaproxyHandle } from "../../lab/engines/haproxy";
import { freePort } from "../../agent/src/util/net";
import { answer, drop, fakeServer, send, startL1, staticServer, waitStatus, type FakeServer } from "./fixtures";

let hp: HaproxyHandle | undefined;
let servers: FakeServer[] = [];
afterEach(async () => {
  await hp?.stop();
  hp = undefined;
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function l1Over(behaviours: Parameters<typeof fakeServer>[1][]): Promise<string> {
  servers = await Promise.all(behaviours.map((b, i) => fakeServer(`s${i + 1}`, b)));
  const noAgent = await freePort();
  const l1 = await startL1({ local: servers.map((s) => staticServer(s, noAgent)) });
  hp = l1.hp;
  await waitStatus(hp, servers.map((s) => s.name), /^UP$/);
  return `${l1.url}/v1/completions`;
}

const hits = (): number => servers.reduce((a, s) => a + s.hits.length, 0);

/**
 * Sends a body of `bytes` until its first try reached the refusing server (the balancer picks
 * the first server); answers whether HAProxy then retried it on the good one (a 200).
 */
async function retried(url: string, bytes: number): Promise<boolean> {
  const [refusing] = servers;
  for (let i = 0; i < 8; i++) {
    const before = refusing.hits.length;
    const r = await send(url, { body: Buffer.alloc(bytes, "x") });
    if (refusing.hits.length > before) {
      expect(refusing.hits[refusing.hits.length - 1].bytes).toBe(bytes);
      return r.status === 200;
    }
  }
  throw new Error(`no request of ${bytes} B reached the refusing server`);
}

describe("L1 retries on a real HAProxy", () => {
  it("retries a 64 KB prompt a server refused (503) on another server", async () => {
    const url = await l1Over([answer(503), answer(200)]);
    expect(await retried(url, 64 * 1024)).toBe(true);
    expect(await retried(url, 120_000)).toBe(true);
    // The limit is one buffer (tune.bufsize 131072 less tune.maxrewrite and the headers):
    // past it the client gets the refusal, as with any proxy that cannot replay a stream.
    expect(await retried(url, 140_000)).toBe(false);
    let lo = 120_000;
    let hi = 140_000;
    while (hi - lo > 100) {
      const mid = Math.round((lo + hi) / 2);
      if (await retried(url, mid)) lo = mid;
      else hi = mid;
    }
    process.stderr.write(`[l1 retries] largest prompt retried: ${lo}–${hi} B (tune.bufsize 131072)\n`);
  });

  it("a request that makes every server drop the connection reaches exactly one server", async () => {
    const url = await l1Over([drop, drop, drop, drop]);
    const r = await send(url, { body: JSON.stringify({ prompt: "query of death" }) });
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(hits()).toBe(1);
  });

  it("never replays a request whose response has started: a stream cut after its first chunk reaches one server", async () => {
    // Headers and one SSE chunk, then the connection drops (a server crashing mid-generation).
    const cutMidStream: Parameters<typeof fakeServer>[1] = (req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"text":"a"}]}\n\n');
      setTimeout(() => req.socket.destroy(), 50);
    };
    const url = await l1Over([cutMidStream, cutMidStream, cutMidStream, cutMidStream]);
    const r = await send(url, { body: JSON.stringify({ prompt: "stream", stream: true }) });
    // The client got the start of the answer (HAProxy forwarded it, then the cut), never a second server's.
    expect(r.status === 200 || r.status === 0).toBe(true);
    expect(hits()).toBe(1);
  });

  it("retries a refusal at most once", async () => {
    const url = await l1Over([answer(503), answer(503), answer(503), answer(503)]);
    const r = await send(url, { body: "{}" });
    expect(r.status).toBe(503);
    expect(hits()).toBe(2);
  });
});
