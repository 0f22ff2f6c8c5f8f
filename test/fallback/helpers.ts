/** Shared pieces of the fallback tests: fake upstream providers and a fake L1 proxy. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { Writable } from "node:stream";
import { createLogger, type Logger } from "../../agent/src/util/log";
import { freePort } from "../../agent/src/util/net";

export interface FakeHttp {
  port: number;
  url: string;
  /** Every request: path, headers, parsed body. */
  seen: Array<{ path: string; headers: IncomingMessage["headers"]; body: Record<string, unknown> }>;
  handler: (req: IncomingMessage, body: Record<string, unknown>, res: ServerResponse) => void;
  close(): Promise<void>;
}

/** A local HTTP server whose behaviour the test sets with `handler`. */
export async function fakeHttp(handler: FakeHttp["handler"]): Promise<FakeHttp> {
  const port = await freePort();
  const f: FakeHttp = {
    port, url: `http://127.0.0.1:${port}`, seen: [], handler,
    close: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>;
      } catch {
        // left empty
      }
      f.seen.push({ path: req.url ?? "", headers: req.headers, body });
      f.handler(req, body, res);
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", () => r()));
  return f;
}

/** An OpenAI chat completion answering `text`. */
export function chatResponse(text: string, model = "m"): Record<string, unknown> {
  return { id: "chatcmpl-x", object: "chat.completion", created: 1, model, choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop", logprobs: null }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } };
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/** A pino logger whose lines the test can read. */
export function captureLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString("utf8"));
      cb();
    },
  });
  return { log: createLogger({ level: "debug", destination }), lines };
}
