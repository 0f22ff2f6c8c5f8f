import { KeepAliveConnection, requestHead } from "../../util/keepalive-get";
import { safeUrl } from "../../util/log";
import { request, type AuthHeaders, type HttpAnswer, type Send } from "./inference";

/**
 * `request` (inference.ts) over one kept-alive connection of its own: for a caller that sends one
 * request at a time, every period, for the life of the node (the model check, the probe). The
 * full client costs about five times the CPU per request (keepalive-get.ts); the answers, the
 * failure details and the one retry on a fresh connection after a socket error are the same.
 * What the lean connection does not take (`https:`, a header it cannot send as is, an answer it
 * does not read) goes through the full client, from then on for an answer it did not read.
 */
export class KeptAlive {
  private conn: KeepAliveConnection | null = null;
  private origin: string | null = null;
  private fullOnly = false;

  /** The same contract as `request`: never throws; failures are observations. */
  readonly send: Send = async (url, timeoutMs, body, signal, auth = {}) => {
    if (this.fullOnly) return request(url, timeoutMs, body, signal, auth);
    const first = await this.once(url, timeoutMs, body, signal, auth);
    if (first === null) return request(url, timeoutMs, body, signal, auth);
    if ("kind" in first && first.kind === "error" && !signal?.aborted) return (await this.once(url, timeoutMs, body, signal, auth)) ?? request(url, timeoutMs, body, signal, auth);
    return first;
  };

  close(): void {
    this.conn?.close();
    this.conn = null;
    this.origin = null;
  }

  /** One exchange; null when the lean connection cannot carry it (the caller uses the full client). */
  private async once(url: string, timeoutMs: number, body: unknown, signal: AbortSignal | undefined, auth: AuthHeaders): Promise<HttpAnswer | { kind: "refused" | "timeout" | "error"; detail: string } | null> {
    let payload: string | undefined;
    let h: ReturnType<typeof requestHead>;
    try {
      payload = body === undefined ? undefined : JSON.stringify(body);
      h = requestHead(payload === undefined ? "GET" : "POST", url, auth, payload === undefined ? undefined : Buffer.byteLength(payload));
    } catch {
      return null; // not a URL: the full client says so in its words
    }
    if ("why" in h) return null;
    const origin = new URL(url).origin;
    if (origin !== this.origin || this.conn === null) {
      this.conn?.close();
      this.conn = new KeepAliveConnection(url);
      this.origin = origin;
    }
    if (this.conn.busy) return null;
    const r = await this.conn.send(h.head, payload, timeoutMs, signal);
    const shown = safeUrl(url);
    if (!("kind" in r)) return r;
    switch (r.kind) {
      case "unsupported":
        this.fullOnly = true;
        this.close();
        return null;
      case "refused":
        return { kind: "refused", detail: `connection refused: ${shown}` };
      case "timeout":
        return { kind: "timeout", detail: `no answer from ${shown} within ${timeoutMs} ms` };
      default:
        return { kind: "error", detail: `${shown}: ${r.detail}` };
    }
  }
}
