/**
 * The public edge (L1): what a client may send, what the proxy adds, and the headers the
 * parts behind the proxy read. The proxy (HAProxy, `haproxy-config.ts`) authenticates the
 * client; nothing behind it trusts a tenant it did not get from there.
 */

/** Header the proxy sets to the authenticated tenant id; any such header a client sends is removed first. */
export const TENANT_HEADER = "x-llmha-tenant";

/** Client header naming one request: a repeat gets the same id, state or result and never runs again. */
export const IDEMPOTENCY_HEADER = "idempotency-key";

/** Response header of a stream that was continued on another server after its first one died. */
export const CONTINUED_HEADER = "x-llmha-continued";

/**
 * Header the L1 proxy's continuation listener puts on an answer it made itself (a 502 for a
 * server that died before answering, a 503 with no server left): what the continuation relay
 * tells apart from a server's own status. It never reaches the client.
 */
export const PROXY_ANSWER_HEADER = "x-llmha-proxy-answer";

/** Prefix of the L4 result route (`GET /v1/llmha/requests/{id}`): served by `llm-ha fallback` at every tier. */
export const RESULT_ROUTE_PREFIX = "/v1/llmha/requests/";

/**
 * What a request id in the result route may be (`req_` and 32 hex digits, as `llm-ha fallback`
 * makes them, within a wider safe set): no dot, slash or percent sign, so a path that passes
 * the edge's exact match cannot be resolved into another route behind it.
 */
export const RESULT_ID_RE = /^[A-Za-z0-9_-]{1,128}$/;

/** The result route, matched exactly: an anchored regex over the raw path, as HAProxy (PCRE) and JavaScript both read it. */
export const RESULT_ROUTE_PATTERN = `^${RESULT_ROUTE_PREFIX}${RESULT_ID_RE.source.slice(1, -1)}$`;

/** One route the edge lets through to a backend: the exact path (or an anchored pattern) and the methods it takes. */
export interface EdgeRoute {
  /** The exact path; with `pattern`, a readable name of the route. */
  path: string;
  /** An anchored regex (source text, no `/` escapes) the raw path must match whole (the result route and its id); otherwise `path` exactly. */
  pattern?: string;
  methods: readonly ("GET" | "POST")[];
}

/** The OpenAI routes the model serves plus the L4 result route; the proxy answers everything else itself. */
export const EDGE_ROUTES: readonly EdgeRoute[] = Object.freeze([
  { path: "/v1/chat/completions", methods: ["POST"] },
  { path: "/v1/completions", methods: ["POST"] },
  { path: "/v1/models", methods: ["GET"] },
  { path: `${RESULT_ROUTE_PREFIX}{id}`, pattern: RESULT_ROUTE_PATTERN, methods: ["GET"] },
]);

/** Tenant ids: a small safe alphabet, so they can be a header value, a Redis key part and a label. */
export const TENANT_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
