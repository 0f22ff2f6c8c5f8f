/**
 * The kubelet's probes and HAProxy's agent-checks keep getting answers whatever
 * another client does. One loopback address (127.0.0.9, a pod) holds 300 slowloris HTTP
 * sockets and 600 idle agent-check sockets, reconnecting whenever one is cut; another
 * address (127.0.0.5: the kubelet, HAProxy) probes `/livez` and the agent-check port the
 * whole time: not one probe may fail.
 */
import { request } from "node:http";
import { connect, type Server } from "node:net";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAgentCheckServer } from "../../agent/src/node/reporters/agent-check";
import { startHttpServer, type HttpView } from "../../agent/src/node/reporters/http";
import { freePort, sleep } from "../../agent/src/util/net";
import { flood, slowloris } from "../../lab/drill/hold-flood";

const ATTACKER = "127.0.0.9";
const PROBER = "127.0.0.5";
let http: Server;
let check: Server;
let httpPort: number;
let checkPort: number;

const view: HttpView = {
  nodeId: "n",
  az: "a",
  decision: () => ({ status: "HEALTHY", phase: "serving", weight: 100, reasons: [] }) as never,
  draining: () => false,
  alive: () => true,
  gpus: () => [],
  model: () => null,
  probe: () => ({ lastLatencyMs: null, p50Ms: null, p95Ms: null, inFlightMs: null, last: null }),
  azHealth: async () => ({ code: 200, body: {} }) as never,
  metrics: new Registry(),
};

beforeAll(async () => {
  [httpPort, checkPort] = [await freePort(), await freePort()];
  // Every address of the node's loopback, as the agent binds its pod IP (hostNetwork).
  http = await startHttpServer("0.0.0.0", httpPort, view);
  check = await startAgentCheckServer("0.0.0.0", checkPort, () => "up ready 100%");
});
afterAll(async () => {
  for (const s of [http, check]) {
    (s as Server & { closeAllConnections?: () => void }).closeAllConnections?.();
    await new Promise((r) => s.close(r));
  }
});

function livez(): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port: httpPort, path: "/livez", localAddress: PROBER, timeout: 2000, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}

function agentCheck(): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ port: checkPort, host: "127.0.0.1", localAddress: PROBER });
    let got = "";
    const t = setTimeout(() => s.destroy(), 2000);
    s.on("data", (b) => {
      got += b.toString();
      if (got.endsWith("\n")) s.end();
    });
    s.on("close", () => {
      clearTimeout(t);
      resolve(got === "up ready 100%\n");
    });
    s.on("error", () => undefined);
  });
}

describe("health listeners under a flood from one address", () => {
  it("300 slowloris HTTP + 600 idle agent-check sockets from 127.0.0.9: every probe from 127.0.0.5 answered", async () => {
    const stopHttp = flood("127.0.0.1", httpPort, 300, slowloris, ATTACKER);
    const stopCheck = flood("127.0.0.1", checkPort, 600, () => undefined, ATTACKER); // connect, never read, never close
    try {
      await sleep(1000); // the flood in place
      let failed = 0;
      for (let round = 0; round < 20; round++) {
        const [a, b] = await Promise.all([livez(), agentCheck()]);
        if (!a) failed += 1;
        if (!b) failed += 1;
        if (!a || !b) process.stderr.write(`probe failed: livez ${a} agent-check ${b}\n`);
        await sleep(100);
      }
      expect(failed).toBe(0);
    } finally {
      stopHttp();
      stopCheck();
    }
  }, 30_000);
});
