/**
 * L2 on a real HAProxy: when the AZ's own servers are down, its requests spread over all the
 * other AZs' servers (`backup`), not onto the first one alone (`option allbackups`).
 */
import { afterAll, describe, expect, it } from "vitest";
import { connect, createServer as createNetServer, type AddressInfo } from "node:net";
import type { HaproxyHandle } from "../../lab/engines/haproxy";
import { freePort } from "../../agent/src/util/net";
import { answer, fakeServer, send, startL1, staticServer, waitStatus, type FakeServer } from "./fixtures";

let hp: HaproxyHandle | undefined;
const servers: FakeServer[] = [];
afterAll(async () => {
  await hp?.stop();
  await Promise.all(servers.map((s) => s.close()));
});

describe("L2 spill of a failed AZ", () => {
  it("spreads over every backup, each within 1.5× its fair share", async () => {
    for (const n of ["b1", "b2", "b3"]) servers.push(await fakeServer(n, answer(200)));
    const noAgent = await freePort();
    // The local server's port has nothing listening: its plain check takes it DOWN.
    const dead = { name: "a1", port: await freePort() };
    const l1 = await startL1({ local: [staticServer(dead, noAgent)], backup: servers.map((s) => staticServer(s, noAgent)) });
    hp = l1.hp;
    await waitStatus(hp, ["a1"], /DOWN/);
    await waitStatus(hp, ["b1", "b2", "b3"], /^UP$/);
    const n = 30;
    for (let i = 0; i < n; i++) expect((await send(`${l1.url}/v1/completions`, { body: "{}" })).status).toBe(200);
    const counts = servers.map((s) => s.hits.length);
    process.stderr.write(`[l1 spread] ${n} requests over 3 backups: ${counts.join("/")}\n`);
    expect(counts.reduce((a, c) => a + c, 0)).toBe(n);
    for (const c of counts) expect(c).toBeLessThanOrEqual((1.5 * n) / servers.length);
  });
});

/** A TCP hop in front of `port` that resets every `nth` connection at once: a lossy cross-AZ link. */
async function lossyLink(port: number, nth: number): Promise<{ port: number; resets: () => number; close(): Promise<void> }> {
  let n = 0;
  let resets = 0;
  const server = createNetServer((c) => {
    if (++n % nth === 0) {
      resets++;
      c.resetAndDestroy();
      return;
    }
    const up = connect(port, "127.0.0.1");
    c.pipe(up).pipe(c);
    up.on("error", () => c.destroy());
    c.on("error", () => up.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, resets: () => resets, close: () => new Promise((r) => server.close(() => r())) };
}

describe("L2 spill over a lossy cross-AZ link", () => {
  // The link here resets a connection HAProxy has already opened (an empty response, which is
  // never retried: it may be a query of death); a link that refuses the SYN is a conn-failure,
  // retried on another server (the drill's cross-az-loss, iptables). Either way the backups stay.
  it("keeps every backup in rotation when one connection in five to them is reset: only those requests fail", async () => {
    const backs: FakeServer[] = [];
    for (const n of ["b1", "b2"]) backs.push(await fakeServer(n, answer(200)));
    // Every request of the fake closes its connection: HAProxy opens one per request, so the link's losses meet live traffic.
    for (const b of backs) b.behaviour = (_req, res) => void res.writeHead(200, { connection: "close", "content-type": "text/plain" }).end("200");
    const links = await Promise.all(backs.map((b) => lossyLink(b.port, 5)));
    const noAgent = await freePort();
    const dead = { name: "a1", port: await freePort() };
    const l1 = await startL1({ local: [staticServer(dead, noAgent)], backup: backs.map((b, i) => staticServer({ name: b.name, port: links[i].port }, noAgent)) });
    try {
      await waitStatus(l1.hp, ["a1"], /DOWN/);
      await waitStatus(l1.hp, ["b1", "b2"], /^UP$/);
      let out = 0;
      // A stats read HAProxy resets under load is a sample missed, not a failure (it was an unhandled rejection).
      const watch = setInterval(() => void l1.hp.stats().then((rows) => (out += rows.filter((r) => r.proxy === "l1_servers" && r.server.startsWith("b") && !/^UP/.test(r.status)).length), () => undefined), 50);
      const statuses: number[] = [];
      for (let i = 0; i < 80; i++) statuses.push((await send(`${l1.url}/v1/completions`, { body: "{}" })).status);
      clearInterval(watch);
      const resets = links.reduce((a, l) => a + l.resets(), 0);
      process.stderr.write(`[l1 lossy] 80 requests over 2 backups, ${resets} connections reset by the link: ${statuses.filter((s) => s !== 200).length} failed, backups seen out ${out} times\n`);
      expect(resets).toBeGreaterThan(5);
      expect(statuses.filter((s) => s !== 200).length).toBeLessThanOrEqual(resets);
      expect(out).toBe(0);
    } finally {
      await l1.hp.stop();
      await Promise.all([...links, ...backs].map((x) => x.close()));
    }
  }, 60_000);
});
