/**
 * L2 on a real HAProxy: when the AZ's own servers are down, its requests spread over all the
 * other AZs' servers (`backup`), not onto the first one alone (`option allbackups`).
 */
import { afterAll, describe, expect, it } from "vitest";
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
