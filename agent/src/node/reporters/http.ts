import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Registry } from "prom-client";
import { takesTraffic, type Decision } from "../../types";
import type { GpuInfo } from "../sources/signals";
import type { AzHealthResponse } from "../../../../contracts/controller";
import { limitServer } from "./conn-limit";

export interface HttpView {
  nodeId: string;
  az: string;
  decision(): Decision;
  draining(): boolean;
  alive(): boolean;
  gpus(): GpuInfo[];
  model(): string | null;
  probe(): { lastLatencyMs: number | null; p50Ms: number | null; p95Ms: number | null; inFlightMs: number | null; last: string | null };
  /** What `GET /az/health` answers (contract in docs/design.md). */
  azHealth(): Promise<AzHealthResponse>;
  /** Extra `/status` fields (fleet: leader, Redis). */
  extra?(): Record<string, unknown>;
  metrics: Registry;
}

function send(res: ServerResponse, code: number, body: unknown, type = "application/json"): void {
  const text = type === "application/json" ? JSON.stringify(body) : String(body);
  res.writeHead(code, { "content-type": type, "cache-control": "no-store", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** `/readyz` and agent-check agree: a node takes traffic only when serving or warming up and not draining. */
export function ready(d: Decision, draining: boolean): boolean {
  return !draining && takesTraffic(d);
}

async function route(v: HttpView, req: IncomingMessage, res: ServerResponse): Promise<void> {
  // Read-only endpoints: nothing here changes the agent.
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET, HEAD");
    return send(res, 405, { error: "read-only endpoint: use GET" });
  }
  const path = (req.url ?? "/").split("?")[0];
  const d = v.decision();
  switch (path) {
    case "/livez":
      return v.alive() ? send(res, 200, { alive: true }) : send(res, 503, { alive: false, error: "evaluation loop stalled" });
    case "/readyz": {
      const ok = ready(d, v.draining());
      return send(res, ok ? 200 : 503, { status: d.status, weight: ok ? d.weight : 0, reasons: d.reasons });
    }
    case "/status":
      return send(res, 200, {
        nodeId: v.nodeId,
        az: v.az,
        status: d.status,
        phase: v.draining() ? "draining" : d.phase,
        weight: d.weight,
        reasons: d.reasons,
        pending: d.pending,
        suppressed: d.suppressed,
        since: new Date(d.since).toISOString(),
        checkedAt: new Date(d.checkedAt).toISOString(),
        loadScore: d.loadScore,
        gpus: v.gpus(),
        model: v.model(),
        probe: v.probe(),
        ...(v.extra?.() ?? {}),
      });
    case "/metrics":
      return send(res, 200, await v.metrics.metrics(), v.metrics.contentType);
    case "/az/health": {
      const a = await v.azHealth();
      return send(res, a.code, a.body);
    }
    default:
      return send(res, 404, { error: `no such endpoint: ${path}`, endpoints: ["/livez", "/readyz", "/status", "/metrics", "/az/health"] });
  }
}

export interface HttpServerOptions {
  /** Connections served at once from all addresses but the node's loopback (scrapers, load balancers, `/az/health` checkers). Default 1024. */
  maxConnections?: number;
  /** Connections one client address may hold at once: one pod's slowloris cannot starve the kubelet's probes. Default 16. */
  maxPerSource?: number;
  /** A client must send its whole request head within this. Default 2000 ms (slowloris: a probe's head takes microseconds). */
  headersTimeoutMs?: number;
  /** …and its whole request within this. Default 3000 ms (every endpoint is a GET without a body). */
  requestTimeoutMs?: number;
  /** A connection idle this long is destroyed. Default 10000 ms. */
  idleTimeoutMs?: number;
}

export function startHttpServer(host: string, port: number, view: HttpView, opts: HttpServerOptions = {}): Promise<Server> {
  const headersTimeout = opts.headersTimeoutMs ?? 2000;
  const server = createServer(
    {
      headersTimeout,
      requestTimeout: Math.max(headersTimeout, opts.requestTimeoutMs ?? 3000),
      keepAliveTimeout: 5000,
      // Node checks the two timeouts above only this often (default 30 s), on a timer that wakes
      // the agent whether or not a connection is open: every 500 ms was two wakes a second for
      // nothing on an idle port. At the headers timeout, a head that never ends is cut between
      // one and two headers timeouts after it began (2–4 s by default).
      connectionsCheckingInterval: headersTimeout,
    },
    (req, res) => {
      route(view, req, res).catch((err: unknown) => {
        if (!res.headersSent) send(res, 500, { error: (err as Error).message });
        else res.destroy();
      });
    },
  );
  limitServer(server, opts.maxConnections ?? 1024, opts.maxPerSource ?? 16);
  server.timeout = opts.idleTimeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}
