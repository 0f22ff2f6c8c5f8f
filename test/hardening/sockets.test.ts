/**
 * Every agent-check socket is closed after the reply, whatever the client
 * sends; both ports cap their connections and time idle ones out.
 */
import { connect, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startAgentCheckServer } from "../../agent/src/node/reporters/agent-check";
import { freePort, waitFor } from "../../agent/src/util/net";

let servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  servers = [];
});

const connections = (s: Server): Promise<number> => new Promise((res, rej) => s.getConnections((e, n) => (e ? rej(e) : res(n))));

/** One client: optionally sends `send`, reads the reply line, closes (as HAProxy's agent-check does). */
function client(port: number, send: string | null): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    let got = "";
    s.on("connect", () => {
      if (send !== null) s.write(send);
    });
    s.on("data", (b) => {
      got += b.toString();
      if (got.endsWith("\n")) s.end();
    });
    s.on("close", () => resolve(got));
    s.on("error", reject);
  });
}

describe("agent-check sockets", () => {
  it("closes every socket after the reply, for clients that send bytes (x\\n, HTTP, agent-send) and for silent ones", async () => {
    const port = await freePort();
    const server = await startAgentCheckServer("127.0.0.1", port, () => "up ready 100%");
    servers.push(server);
    const sends = ["x\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "ping\n", null];
    for (let round = 0; round < 50; round++) {
      const replies = await Promise.all(sends.map((s) => client(port, s)));
      for (const r of replies) expect(r).toBe("up ready 100%\n");
    }
    await waitFor("every agent-check socket closed", async () => (await connections(server)) === 0, { timeoutMs: 3000 });
  });

  it("times out a client that connects, sends and never closes", async () => {
    const port = await freePort();
    const server = await startAgentCheckServer("127.0.0.1", port, () => "up ready 100%", undefined, { idleTimeoutMs: 300 });
    servers.push(server);
    const s = connect(port, "127.0.0.1");
    s.on("error", () => undefined);
    s.write("hold\n");
    s.resume(); // reads the reply, never ends its side
    const closed = new Promise((r) => s.on("close", r));
    await waitFor("the idle client cut off", async () => (await connections(server)) === 0, { timeoutMs: 3000 });
    await closed;
  });

  it("caps concurrent connections", async () => {
    const port = await freePort();
    const server = await startAgentCheckServer("127.0.0.1", port, () => "up ready 100%", undefined, { maxConnections: 3, idleTimeoutMs: 5000 });
    servers.push(server);
    expect(server.maxConnections).toBe(3);
  });
});

describe("HTTP port limits", () => {
  it("cuts off a client that never finishes its request head (slowloris) and caps connections", async () => {
    const { startHttpServer } = await import("../../agent/src/node/reporters/http.js");
    const { Registry } = await import("prom-client");
    const port = await freePort();
    const view = {
      nodeId: "n",
      az: "a",
      decision: () => {
        throw new Error("not used");
      },
      draining: () => false,
      alive: () => true,
      gpus: () => [],
      model: () => null,
      probe: () => ({ lastLatencyMs: null, p50Ms: null, p95Ms: null, inFlightMs: null, last: null }),
      azHealth: async () => ({ code: 200, body: {} }) as never,
      metrics: new Registry(),
    };
    const server = await startHttpServer("127.0.0.1", port, view, { headersTimeoutMs: 300, maxConnections: 7 });
    servers.push(server);
    expect(server.maxConnections).toBe(7);
    const s = connect(port, "127.0.0.1");
    s.on("error", () => undefined);
    s.write("GET /livez HTTP/1.1\r\nHost: x\r\n"); // never the blank line
    s.resume();
    const t0 = Date.now();
    await new Promise((r) => s.on("close", r));
    expect(Date.now() - t0).toBeLessThan(5000);
    await waitFor("no connection left", async () => (await connections(server)) === 0, { timeoutMs: 3000 });
  });
});
