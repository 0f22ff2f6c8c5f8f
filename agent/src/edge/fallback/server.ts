/**
 * `llm-ha fallback`'s HTTP service: OpenAI-compatible `/v1/chat/completions`,
 * `/v1/completions`, `/v1/models`, plus `GET /v1/llmha/requests/{id}`, `/metrics`,
 * `/livez`, `/readyz`. For each request, in order: the verified-answer cache, the external
 * providers by priority (only while the tier says the fleet cannot serve), the Kafka queue
 * (opt-in: `x-llmha-queue: allow` or a queued route; 202 only after the broker's ack), else
 * 503 with `Retry-After`. Every answer names what served it in `x-llmha-degraded`.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import type { Logger } from "../../util/log";
import type { CacheEntry, VerifiedCache } from "./cache";
import type { FallbackMetrics, FallbackOutcome } from "./metrics";
import { acceptQueued, answerIfRepeat, idempotencyKeyOf } from "./accept";
import { answerAndDrain, BodyTooLargeError, errorBody, HttpError, jsonTooDeep, readBody, sendJson, tenantOf } from "./http";
import { BadRequestError, normalizeRequest, type RequestKind } from "./normalize";
import { forwardToProviders, type Provider } from "./providers";
import type { RequestQueue } from "./queue";
import { ANONYMOUS_TENANT, type ResultStore } from "./results";
import type { TierReader } from "./tier";
import { requestTokens, type TenantTokenBudget } from "./budget";
import { closeHttpServer, listenHttp } from "../../util/net";

export interface FallbackServiceOptions {
  /** Model ids served; anything else is a 404. */
  models: string[];
  /** Largest request body. */
  maxBodyBytes: number;
  /** Queue depth at which opted-in requests get a 503 instead. */
  maxQueueDepth: number;
  /** Paths whose requests are queued without the header (e.g. `/v1/completions`). */
  queueRoutes: string[];
  /** `l4`: providers only while the published tier is L4 (or unknown); `always`; `never`. */
  upstreamWhen: "l4" | "always" | "never";
  cache: VerifiedCache | null;
  providers: Provider[];
  queue: RequestQueue | null;
  store: ResultStore | null;
  tier: TierReader;
  metrics: FallbackMetrics;
  log: Logger;
  /** Tokens per tenant per window sent to the paid providers (`LLMHA_FALLBACK_TENANT_TOKENS_PER_MIN`); none: unbounded. */
  budget?: TenantTokenBudget;
  /** Tenants whose replayed results are cached for themselves (`LLMHA_FALLBACK_CACHE_REPLAYED_TENANTS`). */
  cacheReplayedTenants?: readonly string[];
}

const ID_RE = /^[A-Za-z0-9_-]{1,128}$/;
/** Deepest nesting of arrays/objects a request body may have (400 above). */
const MAX_JSON_DEPTH = 64;

/** The cached answer as an OpenAI response (or the SSE chunks of one). */
export function renderCached(e: CacheEntry, model: string, stream: boolean): { json?: unknown; sse?: string[] } {
  const created = Math.floor(Date.now() / 1000);
  const chat = e.kind === "chat";
  const id = `${chat ? "chatcmpl" : "cmpl"}-llmha-${randomBytes(9).toString("hex")}`;
  if (!stream) {
    const choice = chat
      ? { index: 0, message: { role: "assistant", content: e.answer, refusal: null }, finish_reason: e.finishReason, logprobs: null }
      : { index: 0, text: e.answer, finish_reason: e.finishReason, logprobs: null };
    return { json: { id, object: chat ? "chat.completion" : "text_completion", created, model, choices: [choice], usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } } };
  }
  const object = chat ? "chat.completion.chunk" : "text_completion";
  const pieces = e.answer.match(/\S+\s*|\s+/g) ?? [""];
  const chunk = (delta: string | null, finish: string | null, first = false): string => {
    const choice = chat
      ? { index: 0, delta: delta === null ? {} : first ? { role: "assistant", content: delta } : { content: delta }, finish_reason: finish, logprobs: null }
      : { index: 0, text: delta ?? "", finish_reason: finish, logprobs: null };
    return `data: ${JSON.stringify({ id, object, created, model, choices: [choice] })}\n\n`;
  };
  const sse = [chunk(chat ? "" : null, null, true), ...pieces.map((p) => chunk(p, null)), chunk(null, e.finishReason), "data: [DONE]\n\n"];
  if (!chat) sse.shift();
  return { sse };
}

export class FallbackService {
  /** Ids this process queued, with their tenant (answers 202 while Redis cannot be read). */
  private readonly recent = new Map<string, string>();
  private server: Server | null = null;

  constructor(readonly o: FallbackServiceOptions) {}

  private count(outcome: FallbackOutcome): void {
    this.o.metrics.requests.inc({ outcome });
  }

  private unavailable(res: ServerResponse, reason: string, code: string, extra: Record<string, string> = {}): void {
    this.count("unavailable");
    sendJson(res, 503, errorBody(reason, code, "service_unavailable"), { "retry-after": String(this.o.tier.retryAfterS()), "x-llmha-degraded": "unavailable", ...extra });
  }

  readonly handler = (req: IncomingMessage, res: ServerResponse): void => {
    this.route(req, res).catch((err: unknown) => {
      if (err instanceof BodyTooLargeError) {
        this.count("rejected");
        // The whole 413 now, then the rest of the body is read and dropped (bounded) before the close.
        return answerAndDrain(req, res, err.status, errorBody(err.message, err.code), err.headers);
      }
      if (err instanceof HttpError) {
        if (err.status >= 500) this.unavailable(res, err.message, err.code, err.headers);
        else {
          this.count("rejected");
          if (!res.headersSent) sendJson(res, err.status, errorBody(err.message, err.code), err.headers);
        }
        return;
      }
      this.o.log.error({ err: (err as Error).message }, "fallback: unexpected error");
      if (!res.headersSent) this.unavailable(res, "internal error", "internal_error");
      else res.destroy();
    });
  };

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rawPath = (req.url ?? "/").split("?")[0];
    // WHATWG URL parsing resolves dot segments (and %2e ones): a result-route path with them
    // would land on /metrics, /readyz or /livez. A path that parsing would change, or with an
    // encoded slash, is refused, whoever sent it (the edge refuses them before this too).
    if (/%2f|%5c|\\/i.test(rawPath) || !rawPath.startsWith("/") || new URL(rawPath, "http://fallback").pathname !== rawPath) throw new HttpError(400, "the path must not hold dot segments or encoded slashes", "invalid_path");
    const url = new URL(req.url ?? "/", "http://fallback");
    const path = url.pathname.replace(/\/+$/, "") || "/";
    if (path === "/livez") return sendJson(res, 200, { ok: true });
    if (path === "/readyz") return sendJson(res, 200, { ok: true, cache: this.o.cache !== null, queue: this.o.queue !== null, providers: this.o.providers.length });
    if (path === "/metrics") {
      res.writeHead(200, { "content-type": this.o.metrics.registry.contentType });
      res.end(await this.o.metrics.registry.metrics());
      return;
    }
    if (path === "/v1/models") {
      if (req.method !== "GET") throw new HttpError(405, "use GET", "method_not_allowed");
      return sendJson(res, 200, { object: "list", data: this.o.models.map((id) => ({ id, object: "model", created: 0, owned_by: "llm-ha" })) });
    }
    const tenant = tenantOf(req);
    const m = /^\/v1\/llmha\/requests\/([^/]+)$/.exec(path);
    if (m) {
      if (req.method !== "GET") throw new HttpError(405, "use GET", "method_not_allowed");
      return this.requestStatus(decodeURIComponent(m[1]), tenant, res);
    }
    const kind: RequestKind | null = path === "/v1/chat/completions" ? "chat" : path === "/v1/completions" ? "completions" : null;
    if (!kind) throw new HttpError(404, `no route ${path}`, "not_found");
    if (req.method !== "POST") throw new HttpError(405, "use POST", "method_not_allowed");
    const idemKey = idempotencyKeyOf(req);
    const raw = await readBody(req, this.o.maxBodyBytes);
    if (jsonTooDeep(raw, MAX_JSON_DEPTH)) throw new HttpError(400, `the request body nests deeper than ${MAX_JSON_DEPTH} levels`, "too_deep");
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
    } catch {
      throw new HttpError(400, "the request body is not valid JSON", "invalid_json");
    }
    let n;
    try {
      n = normalizeRequest(kind, body);
    } catch (err) {
      if (err instanceof BadRequestError) throw new HttpError(err.status, err.message, err.code);
      throw err;
    }
    if (!this.o.models.includes(n.model)) throw new HttpError(404, `The model \`${n.model}\` does not exist`, "model_not_found");
    const stream = body.stream === true;
    // 0. A repeat of an idempotency key: the bound request's state or result, nothing run again.
    if (await answerIfRepeat(this.o.store, tenant, idemKey, res)) return;

    // 1. Verified-answer cache (Redis down: skipped): the tenant's own replayed answers (when it
    // opted in), then the operator's, which every tenant may be served.
    if (this.o.cache) {
      try {
        const own = this.o.cacheReplayedTenants?.includes(tenant) ? await this.o.cache.get(n, tenant) : null;
        const hit = own ?? (await this.o.cache.get(n, null));
        if (hit) {
          this.count("cache_hit");
          const r = renderCached(hit, n.model, stream);
          const h = { "x-llmha-degraded": "cache", "x-llmha-cache-key": hit.key };
          if (r.json) return sendJson(res, 200, r.json, h);
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...h });
          for (const s of r.sse ?? []) res.write(s);
          res.end();
          return;
        }
      } catch (err) {
        this.o.metrics.cacheErrors.inc();
        this.o.log.warn({ err: (err as Error).message }, "fallback: cache skipped");
      }
    }

    // 2. Providers by priority, while the fleet cannot serve.
    const tier = await this.o.tier.read();
    this.o.metrics.l4.set(tier.level === "L4" ? 1 : tier.level === null ? -1 : 0);
    const upstreamAllowed = this.o.upstreamWhen === "always" || (this.o.upstreamWhen === "l4" && (tier.level === "L4" || tier.level === null));
    let triedProviders = false;
    if (upstreamAllowed && this.o.providers.length) {
      // The providers are paid per token and get the client's body as it is: each tenant's
      // `max_tokens × n` is counted against its budget first (a refusal is not counted).
      const tokens = requestTokens(body);
      const charged = this.o.budget?.charge(tenant, tokens) ?? { ok: true as const, release: () => undefined };
      if (!charged.ok) {
        this.count("rejected");
        if (charged.tooLarge) throw new HttpError(400, `max_tokens × n (${tokens}) is more than this tenant may send the external providers in a minute (${this.o.budget?.tokensPerWindow})`, "over_token_budget");
        throw new HttpError(429, `this tenant's token budget for the external providers is spent for this minute; admitted again in ${charged.retryAfterS} s`, "token_budget_exceeded", { "retry-after": String(charged.retryAfterS) });
      }
      const out = await forwardToProviders(this.o.providers, kind === "chat" ? "/chat/completions" : "/completions", body, (p, r) => {
        this.o.metrics.upstream.inc({ provider: p, result: r });
        if (r === "misconfigured") this.o.metrics.misconfigured.inc({ provider: p });
      });
      for (const p of this.o.providers) {
        this.o.metrics.breakerOpen.set({ provider: p.name }, p.breaker.state === "open" ? 1 : 0);
        this.o.metrics.providerMisconfigured.set({ provider: p.name }, p.misconfigured ? 1 : 0);
      }
      if (out.ok) {
        this.count("upstream");
        const up = out.response;
        const headers: Record<string, string> = { "x-llmha-degraded": `upstream:${out.provider.name}`, "content-type": up.headers.get("content-type") ?? "application/json" };
        res.writeHead(up.status, headers);
        if (!up.body) return void res.end();
        Readable.fromWeb(up.body as unknown as WebReadableStream).on("error", () => res.destroy()).pipe(res);
        return;
      }
      charged.release();
      // Which provider failed how is for the operator (log, metrics), never for the client.
      if (out.tried.length) {
        triedProviders = true;
        this.o.log.warn({ tried: out.tried }, "fallback: no provider answered");
      }
    }

    // 3. The queue, for requests that opted in (a replay never re-queues itself).
    const isReplay = req.headers["x-llmha-replay"] !== undefined;
    const optIn = String(req.headers["x-llmha-queue"] ?? "").toLowerCase() === "allow" || this.o.queueRoutes.includes(path);
    const why = triedProviders ? "; no external provider answered" : "";
    if (optIn && !isReplay) {
      if (!this.o.queue) return this.unavailable(res, `no inference server can take the request and no queue is configured${why}`, "queue_unavailable");
      const depth = this.o.queue.depth;
      if (depth !== null && depth >= this.o.maxQueueDepth) return this.unavailable(res, `the queue is full (${depth} waiting, cap ${this.o.maxQueueDepth})${why}`, "queue_full");
      const out = await acceptQueued(
        { queue: this.o.queue, store: this.o.store, metrics: this.o.metrics, log: this.o.log, remember: (id, t) => this.remember(id, t) },
        { tenant, kind, path: path as "/v1/chat/completions" | "/v1/completions", body, model: n.model },
        idemKey, res,
      );
      if (out.kind === "answered") return;
      return this.unavailable(res, `no inference server can take the request and ${out.reason}${why}`, "queue_unavailable");
    }
    return this.unavailable(res, `no inference server can take the request right now${isReplay ? " (replay)" : ""}${why}; send \`x-llmha-queue: allow\` to have it queued`, "fleet_unavailable");
  }

  private remember(id: string, tenant: string): void {
    this.recent.set(id, tenant);
    if (this.recent.size > 100_000) {
      const first = this.recent.keys().next().value;
      if (first !== undefined) this.recent.delete(first);
    }
  }

  /** A result only for the tenant that queued it; to any other the id does not exist (404, not 403). */
  private async requestStatus(id: string, tenant: string, res: ServerResponse): Promise<void> {
    if (!ID_RE.test(id)) throw new HttpError(404, "unknown request id", "not_found");
    const pending = { id, object: "llmha.request", state: "pending" };
    const mine = this.recent.get(id) === tenant;
    let rec = null;
    if (this.o.store) {
      try {
        rec = await this.o.store.get(id);
      } catch {
        if (mine) return sendJson(res, 202, pending, { "retry-after": "5" });
        throw new HttpError(503, "the result store (Redis) cannot be read", "store_unavailable", { "retry-after": "5" });
      }
    }
    if (rec && (rec.tenant ?? ANONYMOUS_TENANT) !== tenant) rec = null;
    if (!rec || rec.state === "cancelled") {
      if (mine && !rec) return sendJson(res, 202, pending, { "retry-after": "5" });
      throw new HttpError(404, "unknown or expired request id", "not_found");
    }
    if (rec.state === "accepting" || rec.state === "pending" || rec.state === "running") return sendJson(res, 202, { ...pending, queued_at: rec.queuedAt }, { "retry-after": "5" });
    return sendJson(res, 200, {
      id, object: "llmha.request", state: rec.state, status: rec.status ?? null, queued_at: rec.queuedAt, finished_at: rec.finishedAt ?? null,
      attempts: rec.attempts ?? null, ...(rec.state === "done" ? { response: rec.response } : { error: { message: rec.reason ?? "failed" } }),
    });
  }

  /** Listens; resolves with the port (useful with port 0). `setting`: what a failure names (`ListenError`). */
  async listen(port: number, host: string, setting?: string): Promise<number> {
    const s = createServer(this.handler);
    // `Expect: 100-continue` (curl above 1 MB): a body over the limit is refused before it is sent.
    s.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
      if (Number(req.headers["content-length"] ?? "0") <= this.o.maxBodyBytes) res.writeContinue();
      this.handler(req, res);
    });
    s.keepAliveTimeout = 65_000;
    this.server = s;
    return listenHttp(s, port, host, { setting });
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    await closeHttpServer(s);
  }
}
