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

/** One route the edge lets through to a backend: exact path (or prefix) and the methods it takes. */
export interface EdgeRoute {
  path: string;
  /** `true`: `path` is a prefix (the result route); otherwise the exact path. */
  prefix?: boolean;
  methods: readonly ("GET" | "POST")[];
}

/** The OpenAI routes the model serves plus the L4 result route; the proxy answers everything else itself. */
export const EDGE_ROUTES: readonly EdgeRoute[] = Object.freeze([
  { path: "/v1/chat/completions", methods: ["POST"] },
  { path: "/v1/completions", methods: ["POST"] },
  { path: "/v1/models", methods: ["GET"] },
  { path: RESULT_ROUTE_PREFIX, prefix: true, methods: ["GET"] },
]);

/** Tenant ids: a small safe alphabet, so they can be a header value, a Redis key part and a label. */
export const TENANT_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
