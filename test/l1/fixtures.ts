/**
 * Pieces of the L1 proxy tests: tiny HTTP servers standing in for inference servers (they
 * count what reaches them and see a client's abort), a real HAProxy rendered by the one
 * generator, and raw HTTP requests that never share a connection.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import type { HaproxyConfigArgs, HaproxyProxy, HaproxyStaticServer } from "../../contracts/haproxy-config";
import { freePort, waitFor } from "../../agent/src/util/net";

/** What a fake server does with a request whose body it has read. */
export type Behaviour = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

export const answer =
  (status: number, delayMs = 0): Behaviour =>
  (_req, res) => {
    const t = setTimeout(() => res.writeHead(status, { "content-type": "text/plain" }).end(String(status)), delayMs);
    res.on("close", () => clearTimeout(t));
  };

/** Closes the connection after reading the request: a server killed by it, or one that crashed mid-request. */
export const drop: Behaviour = (req) => req.socket.destroy();

export interface FakeServer {
  readonly name: string;
  readonly port: number;
  /** Requests whose body arrived, in order. */
  readonly hits: { at: number; bytes: number }[];
  /** Requests whose connection closed before the answer (ms after the request arrived). */
  readonly aborts: number[];
  behaviour: Behaviour;
  close(): Promise<void>;
}

export async function fakeServer(name: string, behaviour: Behaviour): Promise<FakeServer> {
  const hits: FakeServer["hits"] = [];
  const aborts: number[] = [];
  const srv: { behaviour: Behaviour } = { behaviour };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = Date.now();
      const body = Buffer.concat(chunks);
      hits.push({ at, bytes: body.length });
      res.on("close", () => {
        if (!res.writableFinished) aborts.push(Date.now() - at);
      });
      srv.behaviour(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    name,
    port: (server.address() as AddressInfo).port,
    hits,
    aborts,
    get behaviour() {
      return srv.behaviour;
    },
    set behaviour(b: Behaviour) {
      srv.behaviour = b;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An HTTP server on a random loopback port that counts its connections; `close` ends every one of them. */
export async function countingServer(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; port: number; connections: () => number; close: () => Promise<void> }> {
  let connections = 0;
  const server = createServer(handler);
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The generator's view of a fake server. Its agent port has nothing listening: an agent
 * HAProxy cannot reach counts for nothing, so the plain `check` alone decides UP/DOWN.
 */
export function staticServer(f: { name: string; port: number }, agentPort: number, httpPort = agentPort): HaproxyStaticServer {
  return { name: f.name, address: "127.0.0.1", port: f.port, agentPort, httpPort };
}

/** A real HAProxy with one `agent` proxy named `l1` at the production defaults, except `tuning`. */
export async function startL1(
  servers: { local: HaproxyStaticServer[]; backup?: HaproxyStaticServer[] },
  extra: Partial<Pick<HaproxyProxy, "tuning" | "forwardAzHealth" | "azHealthBind">> & Partial<Omit<HaproxyConfigArgs, "proxies" | "statsSocket">> = {},
): Promise<{ hp: HaproxyHandle; url: string }> {
  const { tuning, forwardAzHealth, azHealthBind, ...globals } = extra;
  const bind = `127.0.0.1:${await freePort()}`;
  const hp = await startHaproxy({
    ...globals,
    proxies: [{ name: "l1", bind, health: "agent", forwardAzHealth, azHealthBind, tuning, servers: { kind: "static", local: servers.local, backup: servers.backup ?? [] } }],
  });
  return { hp, url: `http://${bind}` };
}

/** Waits until every named server of `l1_servers` shows `status`. */
export async function waitStatus(hp: HaproxyHandle, names: string[], status: RegExp, timeoutMs = 10_000): Promise<void> {
  await waitFor(
    `${names.join(", ")} ${status.source}`,
    async () => {
      const rows = (await hp.stats()).filter((r) => r.proxy === "l1_servers" && names.includes(r.server));
      return rows.length === names.length && rows.every((r) => status.test(r.status));
    },
    { timeoutMs, everyMs: 50 },
  );
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  ms: number;
}

/**
 * One request on a connection of its own (`Connection: close`, no agent): a test that
 * counts connections must not see them reused. Resolves with status 0 on a socket error.
 */
export function send(url: string, opts: { method?: string; body?: Buffer | string; timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Answer> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const req = request(url, { method: opts.method ?? (opts.body !== undefined ? "POST" : "GET"), agent: false, headers: { connection: "close" }, signal: opts.signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString(), ms: Date.now() - t0 }));
      res.on("error", () => resolve({ status: 0, headers: {}, body: "", ms: Date.now() - t0 }));
    });
    req.setTimeout(opts.timeoutMs ?? 10_000, () => req.destroy());
    req.on("error", () => resolve({ status: 0, headers: {}, body: "", ms: Date.now() - t0 }));
    req.end(opts.body);
  });
}

/** A streamed completion POSTed to `port` (`agent: false`: a connection of its own): its status and whole body. */
export function completion(port: number, agent: false | undefined = undefined): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: "m", prompt: "p", max_tokens: 2, stream: true });
    const req = request({ host: "127.0.0.1", port, method: "POST", path: "/v1/completions", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** HAProxy's `show stat` now, as a lookup of one row (proxy, server) by its CSV column names. */
export async function statRows(hp: HaproxyHandle): Promise<(px: string, sv: string) => Record<string, string>> {
  const csv = (await hp.command("show stat")).trim().split("\n");
  const head = csv[0].replace(/^# /, "").split(",");
  return (px, sv) => {
    const f = csv.slice(1).map((l) => l.split(",")).find((x) => x[0] === px && x[1] === sv);
    if (!f) throw new Error(`no stats row ${px}/${sv}`);
    return Object.fromEntries(head.map((h, i) => [h, f[i]]));
  };
}
