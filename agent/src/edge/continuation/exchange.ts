/**
 * One request's life in the continuation relay: forwarded to the proxy's continuation listener, its
 * answer passed on event by event while the delivered text is kept, and, when the server dies under
 * it, asked once more with what was delivered and the second answer spliced into the first (or
 * retried whole, or ended with an error the client's SDK raises). The relay (relay.ts) owns the
 * listener and the connections; an Exchange owns one request.
 */
import { StringDecoder } from "node:string_decoder";
import { CONTINUED_HEADER, PROXY_ANSWER_HEADER } from "../../../../contracts/edge";
import type { ContinuationKind, ContinuationOutcome } from "../../../../contracts/continuation";
import { Delivered, SseSplitter, Splicer, errorEvent, eventData, planContinuation, type Body, type Route } from "./answer";
import type { ContinuationMetrics } from "./metrics";
import type { RelayAddress } from "./config";
import { header, type Headers } from "./h1";
import type { H1Call, H1Handler } from "./h1-pool";
import type { H1Request, H1Response } from "./h1-server";

export interface RelayOptions {
  /** The proxy's loopback continuation listener: its address, or its Unix socket. */
  upstream: RelayAddress;
  /** The servers' kind: how a chat answer is carried on (contracts/continuation.ts). */
  kind: ContinuationKind;
  /** No chunk for this long after the answer began: the server is taken for dead. */
  stallMs: number;
  /**
   * Pause before the second request when the server vanished under the answer (a reset, a cut,
   * the proxy's own 502): the proxy still has it in rotation for a few checks, and with no other
   * server of its AZ up it would send the second request to the same dying server — the chaos
   * campaign saw that end as a "query of death" that was not one. Not after a stall: that waited
   * long enough. Default none (the command's default is 250 ms).
   */
  resendDelayMs?: number;
  /** Largest request body read (the edge already refused larger ones). */
  maxBodyBytes: number;
  /**
   * Connections to the listener: at most `maxSockets` open (the listener's maxconn; a stream holds
   * one throughout, so one past it waits for a stream to end, as it would in the listener's
   * accept queue), `maxFreeSockets` of them kept idle. Default both the config's default (992).
   */
  upstreamPool?: { maxSockets: number; maxFreeSockets: number };
  /** Local address of the connections to the servers (the SOCKS4 tunnels). Default the kernel's choice. */
  source?: string;
  metrics: ContinuationMetrics;
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

const HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "expect", "upgrade", "te", "trailer", PROXY_ANSWER_HEADER]);

export function forwardable(h: Headers): Headers {
  const out: Headers = {};
  for (const k in h) if (!HOP.has(k)) out[k] = h[k];
  return out;
}

function routeOf(method: string, url: string): Route | null {
  if (method !== "POST") return null;
  const path = url.split("?")[0];
  return path === "/v1/chat/completions" ? "chat" : path === "/v1/completions" ? "completions" : null;
}

export function jsonError(res: H1Response, status: number, message: string, code: string, extra: Record<string, string> = {}): void {
  const body = JSON.stringify({ error: { message, type: "server_error", param: null, code } });
  res.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...extra });
  res.end(body);
}

/** What an Exchange needs of its relay: the settings, and a request to the continuation listener. */
export interface ExchangeHost {
  readonly opts: RelayOptions;
  /** `first`: the request's first attempt (over its tunnel when it came through one). */
  upstream(req: H1Request, payload: Buffer, h: H1Handler, first: boolean): H1Call;
}

type Phase = "first" | "second";

/** One client request and the one or two upstream requests made for it. */
export class Exchange {
  private phase: Phase = "first";
  private splicer: Splicer | null = null;
  private failedAt = 0;
  private how: "continue" | "restart" | "retry" | null = null;
  /** The request's JSON body once parsed (null: not a JSON object), undefined until something needs it. */
  private parsed: Body | null | undefined;
  private counted = false;
  private d: Delivered | null = null;
  private ended = false;
  private streamOpen = false;
  private heldBytes = 0;

  constructor(
    private readonly relay: ExchangeHost,
    private readonly req: H1Request,
    private readonly res: H1Response,
    private readonly raw: Buffer,
  ) {
  }

  private get o(): RelayOptions {
    return this.relay.opts;
  }

  /**
   * The request goes out as it came. Its body is kept as bytes (the retry sends them again) and
   * parsed only when something needs it: a continuation, the query-of-death guard, a whole answer's
   * count. A stream that is never cut never holds a parsed copy of its prompt, which with real
   * prompts of tens of KiB is most of what an open stream would cost the relay.
   */
  start(): void {
    this.res.on("close", () => this.finish());
    this.send(this.raw);
    const route = routeOf(this.req.method, this.req.url);
    if (route) this.d = new Delivered(route);
  }

  /** The completion route being watched (what is delivered is kept for it), or null: passed through as it is. */
  private get route(): Route | null {
    return this.d?.route ?? null;
  }

  /** The request's body as a JSON object, parsed once on first need; null when it is not one (the server answers its own 400). */
  private body(): Body | null {
    if (this.parsed !== undefined) return this.parsed;
    this.parsed = null;
    if (this.route) {
      try {
        const v: unknown = JSON.parse(this.raw.toString("utf8"));
        if (typeof v === "object" && v !== null && !Array.isArray(v)) this.parsed = v as Body;
      } catch {
        // Not JSON: passed through.
      }
    }
    return this.parsed;
  }

  /** Whether this is a completion the relay carries on when its server fails: its route, and a JSON object body. */
  private get watched(): boolean {
    return this.route !== null && this.body() !== null;
  }

  /**
   * Counts the request once, by route and whether it streams: an answer streamed (200, SSE) was
   * asked for as a stream; any other answer, or a failure before one, reads the body's `stream`.
   */
  private count(streamed: boolean): void {
    if (this.counted || !this.route) return;
    this.counted = true;
    // Not a JSON completion: not watched, not counted.
    if (!streamed && this.body() === null) return;
    this.o.metrics.requests.inc({ route: this.route, stream: String(streamed || this.body()?.stream === true) });
  }

  private outcome(o: ContinuationOutcome): void {
    this.o.metrics.outcomes.inc({ outcome: o, kind: this.o.kind });
    this.o.log?.("continuation", { outcome: o, route: this.route ?? undefined, delivered_tokens: this.d?.tokens ?? 0 });
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.streamOpen) this.o.metrics.open.dec();
    this.o.metrics.deliveredBytes.dec(this.heldBytes);
  }

  private send(payload: Buffer): void {
    let settled = false;
    let call: H1Call | null = null;
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      call?.abort();
      this.onFailure(why);
    };
    this.res.on("close", () => {
      if (!this.res.writableFinished) call?.abort();
    });
    // What the answer's body goes to, set by its head: a stream passed on, a whole answer kept,
    // or nothing (read past, so the connection is kept).
    let body: { data(b: Buffer): void; end(): void; aborted(): void } = { data: () => {}, end: () => {}, aborted: () => fail("aborted") };
    call = this.relay.upstream(this.req, payload, {
      onResponse: (status, headers) => {
        const sse = /^text\/event-stream/i.test(header(headers, "content-type") ?? "");
        const proxyMade = headers[PROXY_ANSWER_HEADER] !== undefined;
        if (status === 502 && proxyMade && this.watched) return fail("no-answer");
        const streamed = this.route !== null && status === 200 && sse;
        this.count(streamed);
        if (streamed) {
          body = this.onStream(headers, () => (settled = true), fail, () => call?.abort());
          return;
        }
        if (this.res.headersSent) {
          // The second answer of a cut stream was refused (no server left, an error status).
          settled = true;
          this.o.log?.("continuation refused", { status, proxy_made: proxyMade, content_type: header(headers, "content-type") });
          return this.endWithError("the server answering this stream failed and no other could carry it on", "continuation_failed", "failed");
        }
        // A whole answer is small: it is kept until complete, so a server dying mid-body can still be retried.
        const parts: Buffer[] = [];
        body = {
          data: (b) => parts.push(Buffer.from(b)),
          end: () => {
            if (settled) return;
            settled = true;
            const out = forwardable(headers);
            if (this.phase === "second") out[CONTINUED_HEADER] = "retried";
            this.res.writeHead(status, out);
            this.res.end(Buffer.concat(parts));
            if (this.how === "retry") this.o.metrics.added.observe({ how: "retry" }, (Date.now() - this.failedAt) / 1000);
          },
          aborted: () => fail(this.watched ? "aborted" : "pass"),
        };
      },
      onData: (b) => body.data(b),
      onEnd: () => body.end(),
      onError: (kind) => (kind === "error" ? fail("error") : body.aborted()),
    }, this.phase === "first");
  }

  /** An SSE answer: passed on event by event (the first) or spliced (the second). */
  private onStream(headers: Headers, settle: () => void, fail: (why: string) => void, drop: () => void): { data(b: Buffer): void; end(): void; aborted(): void } {
    const d = this.d as Delivered;
    if (!this.res.headersSent) {
      const out = forwardable(headers);
      out.trailer = CONTINUED_HEADER;
      if (this.phase === "second") out[CONTINUED_HEADER] = "retried";
      this.res.writeHead(200, out);
      this.streamOpen = true;
      this.o.metrics.open.inc();
    }
    const split = new SseSplitter();
    const utf8 = new StringDecoder("utf8");
    let stall: NodeJS.Timeout | null = null;
    // One timer per stream, pushed back on every chunk (`refresh` reuses it: no new timer a token).
    const arm = (): void => {
      if (stall) stall.refresh();
      else stall = setTimeout(() => fail("stall"), this.o.stallMs);
    };
    const disarm = (): void => {
      if (stall) clearTimeout(stall);
      stall = null;
    };
    arm();
    let firstSpliced = false;
    const onData = (b: Buffer): void => {
      arm();
      for (const ev of split.push(utf8.write(b))) {
        const data = eventData(ev);
        if (data === "[DONE]") {
          if (this.splicer && !this.splicer.caughtUp) {
            disarm();
            settle();
            return this.endWithError("the answer run again did not match what was already sent", "continuation_mismatch", "mismatch");
          }
          d.done = true;
          this.res.write(ev);
          continue;
        }
        if (data === null) {
          if (!this.splicer) this.res.write(ev);
          continue;
        }
        if (this.splicer) {
          const out = this.splicer.feed(data);
          if (this.splicer.mismatch) {
            disarm();
            settle();
            drop();
            return this.endWithError("the answer run again did not match what was already sent", "continuation_mismatch", "mismatch");
          }
          if (!out) continue;
          this.track(out);
          this.res.write(`data: ${JSON.stringify(out)}\n\n`);
          if (!firstSpliced) {
            firstSpliced = true;
            this.o.metrics.added.observe({ how: this.how ?? "continue" }, (Date.now() - this.failedAt) / 1000);
          }
        } else {
          this.track(data);
          this.res.write(ev);
        }
      }
    };
    const end = (): void => {
      disarm();
      if (d.done) {
        settle();
        if (this.phase === "second") this.res.addTrailers({ [CONTINUED_HEADER]: this.how ?? "continued" });
        this.res.end();
        return;
      }
      fail("ended");
    };
    const aborted = (): void => {
      disarm();
      fail("aborted");
    };
    return { data: onData, end, aborted };
  }

  private track(chunk: Body): void {
    const d = this.d as Delivered;
    const before = d.text.length;
    d.add(chunk);
    const grew = d.text.length - before;
    if (grew > 0) {
      this.heldBytes += grew;
      this.o.metrics.deliveredBytes.inc(grew);
    }
  }

  private endWithError(message: string, code: string, outcome: ContinuationOutcome | null): void {
    if (outcome) this.outcome(outcome);
    if (!this.res.headersSent) return jsonError(this.res, 502, message, code);
    this.res.end(errorEvent(message, code));
  }

  private onFailure(why: string): void {
    if (this.ended || this.res.writableEnded) return;
    this.count(false);
    if (!this.watched || why === "pass") {
      if (!this.res.headersSent) return jsonError(this.res, 502, "the inference server failed before answering", "upstream_failed");
      this.res.destroy();
      return;
    }
    const d = this.d as Delivered;
    if (this.phase === "second") {
      // The query-of-death guard: one request costs at most two servers.
      return this.endWithError("the servers answering this request failed twice; it is not tried again (it may be what kills them)", "query_of_death_guard", "failed_twice");
    }
    this.phase = "second";
    this.failedAt = Date.now();
    if (!this.res.headersSent || d.text === "") {
      if (this.res.headersSent && d.toolCalls) return this.endWithError("the server died while emitting tool calls; tool-call streams are not continued", "continuation_unsupported", "tool_calls");
      // Nothing delivered: the same request once more.
      this.how = "retry";
      this.outcome("retried");
      if (this.res.headersSent) this.splicer = new Splicer(d, "continue");
      return this.resend(why, this.raw);
    }
    if (d.finished) {
      // Every token was out; only the closing events were lost.
      this.res.end("data: [DONE]\n\n");
      return;
    }
    const plan = planContinuation(d.route, this.o.kind, this.body() as Body, d);
    if (plan.how === "none") {
      const msg = plan.outcome === "tool_calls" ? "the server died while emitting tool calls; tool-call streams are not continued" : `the server died mid-answer and ${this.o.kind} servers cannot continue a chat answer that is not greedy with a seed`;
      return this.endWithError(msg, "continuation_unsupported", plan.outcome);
    }
    this.how = plan.how;
    this.outcome(plan.how === "continue" ? "continued" : "restarted");
    this.splicer = new Splicer(d, plan.how);
    // An SSE comment: clients ignore it; a reader of the raw stream sees where the answer was carried on.
    this.res.write(`: ${CONTINUED_HEADER} ${plan.how} after ${d.tokens} tokens\n\n`);
    this.resend(why, Buffer.from(JSON.stringify(plan.body)));
  }

  /** The second request: after `resendDelayMs` when the server vanished, at once after a stall; not if the client left meanwhile. */
  private resend(why: string, payload: Buffer): void {
    const delay = why === "stall" ? 0 : (this.o.resendDelayMs ?? 0);
    if (delay === 0) return this.send(payload);
    setTimeout(() => {
      if (!this.ended && !this.res.writableEnded) this.send(payload);
    }, delay);
  }
}
