/**
 * Overload on a real HAProxy, scaled down (2 GPU nodes of 2 slots, 16 connections): the
 * excess gets a fast 503 with `Retry-After` instead of waiting, and the proxy's `/healthz`
 * and the zone's `/az/health` (its own listener) still answer while the inference
 * frontend is full.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import type { HaproxyHandle } from "../../lab/engines/haproxy";
import { freePort, sleep } from "../../agent/src/util/net";
import { answer, fakeServer, send, startL1, staticServer, waitStatus, type FakeServer } from "./fixtures";

const GENERATION_MS = 4000;
const QUEUE_MS = 300;
let hp: HaproxyHandle | undefined;
let agents: Server | undefined;
let azHealth = "";
const servers: FakeServer[] = [];
afterAll(async () => {
  await hp?.stop();
  await Promise.all(servers.map((s) => s.close()));
  agents?.closeAllConnections();
  agents?.close();
});

describe("L1 overload on a real HAProxy", () => {
  it("answers the excess 503 + Retry-After at once; /healthz and /az/health stay fast", async () => {
    for (const n of ["g1", "g2"]) servers.push(await fakeServer(n, answer(200, GENERATION_MS)));
    // The nodes' agents: /livez for HAProxy's check, /az/health for the zone's checker.
    agents = createServer((req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ az: "az-a", path: req.url })));
    await new Promise<void>((resolve) => agents!.listen(0, "127.0.0.1", resolve));
    const agentHttp = (agents.address() as AddressInfo).port;
    const noAgent = await freePort();
    const monitor = `127.0.0.1:${await freePort()}`;
    azHealth = `127.0.0.1:${await freePort()}`;
    const l1 = await startL1(
      { local: servers.map((s) => staticServer(s, noAgent, agentHttp)) },
      {
        monitorBind: monitor,
        forwardAzHealth: true,
        azHealthBind: azHealth,
        maxconn: 16,
        healthConns: 8,
        tuning: { serverMaxconn: 2, timeoutQueueMs: QUEUE_MS },
      },
    );
    hp = l1.hp;
    await waitStatus(hp, ["g1", "g2"], /^UP$/);

    // 20 slow requests: more than the nodes' 4 slots, more than the frontend's 8 connections,
    // more than the process's 16.
    const burst = Array.from({ length: 20 }, () => send(`${l1.url}/v1/completions`, { body: "{}", timeoutMs: GENERATION_MS + 3000 }));
    await sleep(200);
    const [healthz, az] = await Promise.all([send(`http://${monitor}/healthz`, { timeoutMs: 1500 }), send(`http://${azHealth}/az/health`, { timeoutMs: 1500 })]);
    const answers = await Promise.all(burst);
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    process.stderr.write(
      `[l1 overload] /healthz ${healthz.status} in ${healthz.ms} ms, /az/health ${az.status} in ${az.ms} ms; ` +
        `${ok.length} served, ${refused.length} refused (${refused.map((a) => a.status).join(",")}) within ${Math.max(0, ...refused.map((a) => a.ms))} ms\n`,
    );
    expect(healthz.status).toBe(200);
    expect(healthz.ms).toBeLessThan(500);
    expect(az.status).toBe(200);
    // Healthy or not, and nothing else (the agents' JSON stays inside).
    expect(JSON.parse(az.body)).toEqual({ healthy: true });
    expect(az.ms).toBeLessThan(500);
    expect(ok).toHaveLength(4);
    expect(refused).toHaveLength(16);
    for (const a of refused) {
      expect(a.status).toBe(503);
      expect(a.headers["retry-after"]).toBe("1");
      // Refused at once, not after a generation: a few queue timeouts at most.
      expect(a.ms).toBeLessThan(GENERATION_MS / 2);
    }
  });

  it("serves only /az/health on the zone's health listener", async () => {
    expect((await send(`http://${azHealth}/az/health`, { timeoutMs: 1500 })).status).toBe(200);
    // The agents' other pages (/status, /metrics) stay off the listener Route53 reaches.
    expect((await send(`http://${azHealth}/status`, { timeoutMs: 1500 })).status).toBe(404);
  });
});
