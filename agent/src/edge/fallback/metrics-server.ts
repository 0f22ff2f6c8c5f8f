/**
 * The fallback's metrics listener (`LLMHA_FALLBACK_METRICS_ADDR`, default `0.0.0.0:9411`):
 * what Prometheus scrapes. Read-only and nothing else: `GET`/`HEAD /metrics` (the fallback's
 * registry) and `/healthz`; every other path is a 404, every other method a 405, and no
 * request body is read. The OpenAI-compatible API stays on its own listener (loopback in the
 * L1 pod), so opening this port to Prometheus opens no way to send or read requests.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { closeHttpServer, listenHttp } from "../../util/net";

/** What the listener serves: a registry, or anything that renders one (the relay's workers summed). */
export interface MetricsSource {
  metrics(): Promise<string>;
  readonly contentType: string;
}

export class FallbackMetricsServer {
  private server: Server | null = null;

  /** `unhealthy`: why `/healthz` answers 503 now, or null (200); by default always healthy. */
  constructor(
    private readonly metrics: { readonly registry: MetricsSource },
    private readonly unhealthy: () => string | null = () => null,
  ) {}

  private readonly handler = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, type: string, body: string, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body), "cache-control": "no-store", ...headers });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    // Nothing is read: a body sent anyway is dropped with the connection.
    req.resume();
    if (path !== "/metrics" && path !== "/healthz") return send(404, "text/plain; charset=utf-8", "not found: this listener serves GET /metrics and /healthz only\n");
    if (req.method !== "GET" && req.method !== "HEAD") return send(405, "text/plain; charset=utf-8", "method not allowed: GET or HEAD\n", { allow: "GET, HEAD" });
    if (path === "/healthz") {
      const why = this.unhealthy();
      return why === null ? send(200, "text/plain; charset=utf-8", "ok\n") : send(503, "text/plain; charset=utf-8", `${why}\n`);
    }
    this.metrics.registry.metrics().then(
      (text) => send(200, this.metrics.registry.contentType, text),
      (err: unknown) => send(500, "text/plain; charset=utf-8", `metrics unavailable: ${(err as Error).message}\n`),
    );
  };

  /**
   * Listens; resolves with the port (useful with port 0). A port in use fails with the address
   * and the setting named (`setting`: the command's own, the fallback's by default).
   */
  async listen(port: number, host: string, setting = "LLMHA_FALLBACK_METRICS_ADDR"): Promise<number> {
    const s = createServer(this.handler);
    s.requestTimeout = 10_000;
    s.headersTimeout = 5_000;
    const got = await listenHttp(s, port, host, { setting });
    this.server = s;
    return got;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    await closeHttpServer(s);
  }
}
