/**
 * The edge's 413 answerer. HAProxy answering a request itself closes the connection without
 * reading the rest of the body: a client still uploading (node:http, the OpenAI SDK) gets
 * EPIPE or a reset instead of the status. So the proxy sends oversized requests here; the
 * sink reads and discards the body (up to a bound of bytes and time), then answers `413`
 * with an OpenAI-style error and closes cleanly. Runs in `llm-ha edge-sync`, beside HAProxy.
 */
import { createServer, type Server } from "node:http";
import { closeHttpServer, listenHttp } from "../../util/net";

export interface EdgeSinkOptions {
  host: string;
  port: number;
  /** The limit named in the error. */
  maxBodyBytes: number;
  /** Bytes read before giving up on a client and closing. Default 256 MiB. */
  drainBytes?: number;
  /** Time allowed to read them. Default 30000 ms. */
  drainTimeoutMs?: number;
}

export interface EdgeSink {
  readonly port: number;
  /** Requests answered 413 so far. */
  readonly answered: number;
  close(): Promise<void>;
}

export async function startEdgeSink(o: EdgeSinkOptions): Promise<EdgeSink> {
  let answered = 0;
  const limit = o.drainBytes ?? 256 * 1024 * 1024;
  const server: Server = createServer((req, res) => {
    let read = 0;
    const body = JSON.stringify({ error: { message: `request body larger than ${o.maxBodyBytes} bytes`, type: "invalid_request_error", code: "request_too_large" } });
    const done = (): void => {
      if (res.headersSent) return;
      answered++;
      res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" }).end(body);
    };
    const t = setTimeout(() => req.destroy(), o.drainTimeoutMs ?? 30_000);
    req.on("data", (c: Buffer) => {
      read += c.length;
      if (read > limit) req.destroy();
    });
    req.on("end", () => {
      clearTimeout(t);
      done();
    });
    req.on("close", () => clearTimeout(t));
  });
  server.requestTimeout = 0;
  server.headersTimeout = 10_000;
  const port = await listenHttp(server, o.port, o.host);
  return {
    port,
    get answered() {
      return answered;
    },
    close: () => closeHttpServer(server),
  };
}
