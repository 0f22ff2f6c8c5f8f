/**
 * The public edge of an L1 proxy, rendered into its frontend by the one generator
 * (`haproxy-config.ts`): an allow-list of routes and methods, client API keys checked
 * against a map of their SHA-256 hashes (kept by `llm-ha edge-sync` through HAProxy's
 * runtime API: adding, rotating and revoking a key needs no reload), limits per key
 * (requests per second and requests in flight, stick tables), a body-size limit, and the
 * tenant header set by the proxy alone. Everything refused is answered by HAProxy itself
 * with an OpenAI-style JSON error: it never reaches a server, the queue or the fallback.
 */
import { EDGE_ROUTES, TENANT_HEADER } from "./edge";

export interface HaproxyEdge {
  /**
   * Path of the key map HAProxy loads at start: one line per key,
   * `<sha256 hex of the key> <keyId>:<tenant>:<rps>:<concurrency>` (`edgeMapLine`). Must exist.
   */
  keysMap: string;
  /**
   * Largest request body (`Content-Length`) in bytes; past it `413`. A body without
   * Content-Length (chunked) gets the same 413 past `chunkedBodyLimit` (half a buffer). Default 8 MiB.
   */
  maxBodyBytes?: number;
  /**
   * Requests without a valid key one source address may make in 10 s; past it every request
   * of that address is answered `429` until its rate falls. Off by default: it needs the
   * clients' own addresses at HAProxy (behind an NLB: proxy protocol or client IP
   * preservation), otherwise every client shares the load balancer's address. Refused
   * requests never reach a server either way: a 401 is HAProxy's own answer.
   */
  unauthPer10s?: number;
  /**
   * `address:port` of the 413 answerer (`llm-ha edge-sync`'s sink): an oversized request goes
   * there, which reads the body before answering, so every client gets its status. Without it
   * HAProxy answers 413 itself and closes mid-upload (a client still sending sees EPIPE).
   */
  sinkAddress?: string;
  /**
   * Connections one source address may hold open on the frontend at once; past it a new one
   * is closed as it is accepted. Default `EDGE_CONNS_PER_SOURCE` (256), at most a quarter of
   * the frontend's maxconn. Needs the clients' own addresses, like `unauthPer10s`.
   */
  connsPerSource?: number;
  /** Keys (and source addresses) the stick tables hold. Default 100000. */
  tableSize?: number;
  /**
   * Name of an environment variable of the HAProxy process holding the inference servers'
   * own API key (vLLM `--api-key`): the servers get `Authorization: Bearer ${VAR}` instead
   * of the client's. Without it the client's `Authorization` is removed. Client keys never
   * go past the proxy.
   */
  upstreamKeyEnv?: string;
}

export const EDGE_DEFAULTS = Object.freeze({ maxBodyBytes: 8 * 1024 * 1024, tableSize: 100_000 });

/** What the map holds for one key. */
export interface EdgeKeyEntry {
  /** Short public id of the key (`llm-ha keys list`), also the limits' tracking key. */
  id: string;
  tenant: string;
  /** Requests per second (over the last second). */
  rps: number;
  /** Requests in flight at once. */
  concurrency: number;
}

const KEY_ID_RE = /^[a-z0-9]{4,32}$/;
const HASH_RE = /^[0-9a-f]{64}$/;
/** What a client key may look like on the wire; anything else is refused without a lookup. */
export const CLIENT_KEY_RE = /^[A-Za-z0-9_.~+/=-]{16,256}$/;

export class EdgeMapError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EdgeMapError";
  }
}

/** The map value of a key: `<id>:<tenant>:<rps>:<concurrency>`. */
export function edgeMapValue(e: EdgeKeyEntry): string {
  if (!KEY_ID_RE.test(e.id)) throw new EdgeMapError(`key id ${JSON.stringify(e.id)} must match ${KEY_ID_RE}`);
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(e.tenant)) throw new EdgeMapError(`tenant ${JSON.stringify(e.tenant)} must be lowercase letters, digits and '-'`);
  for (const [what, v] of [["rps", e.rps], ["concurrency", e.concurrency]] as const) {
    if (!Number.isInteger(v) || v < 1 || v > 1_000_000) throw new EdgeMapError(`${what} ${v} of key ${e.id} must be a whole number from 1 to 1000000`);
  }
  return `${e.id}:${e.tenant}:${e.rps}:${e.concurrency}`;
}

/** One map line (`<hash> <value>`). */
export function edgeMapLine(hash: string, e: EdgeKeyEntry): string {
  if (!HASH_RE.test(hash)) throw new EdgeMapError(`key hash ${JSON.stringify(hash)} is not 64 lowercase hex digits`);
  return `${hash} ${edgeMapValue(e)}`;
}

/** A map value read back (from `show map` or the file); null when it is not one of ours. */
export function parseEdgeMapValue(v: string): EdgeKeyEntry | null {
  const m = /^([a-z0-9]{4,32}):([a-z0-9][a-z0-9-]{0,62}):(\d{1,7}):(\d{1,7})$/.exec(v);
  return m ? { id: m[1], tenant: m[2], rps: Number(m[3]), concurrency: Number(m[4]) } : null;
}

/** An OpenAI-style error body answered by the proxy. */
function errorBody(message: string, type: string, code: string): string {
  const body = JSON.stringify({ error: { message, type, code } });
  if (body.includes("'")) throw new EdgeMapError("an edge error body cannot hold a single quote");
  return `'${body}'`;
}

function answer(status: number, message: string, type: string, code: string, extra = ""): string {
  return `http-request return status ${status} content-type application/json string ${errorBody(message, type, code)}${extra}`;
}

/** Names of the stick-table backends of one proxy's edge. */
export function edgeTables(proxy: string): { keys: string; src: string; sink: string } {
  return { keys: `${proxy}_edge_keys`, src: `${proxy}_edge_src`, sink: `${proxy}_edge_sink` };
}

function positive(what: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new EdgeMapError(`${what} ${v} must be a whole number ≥ 1`);
}

/** What the frontend's edge rules need to know of the rest of the configuration. */
export interface EdgeFrame {
  /** `tune.bufsize`: a body without Content-Length is measured in one buffer. */
  bufsize: number;
  /** The frontend's `maxconn`: one source address may hold at most a share of it. */
  frontendMaxconn: number;
}

/**
 * Largest body without `Content-Length` (chunked) the edge lets through: HAProxy 2.6 can only
 * measure such a body while it sits whole in one buffer (`wait-for-body`, `req.body_len`).
 * Half a buffer, with `EDGE_MAX_HEADER_SHARE` for the headers, stays below what the buffer
 * holds after HAProxy's rewrite reserve: a body larger than this is seen to be larger,
 * never cut at a full buffer and passed as a small one. With the default 128 KiB buffer:
 * 64 KiB. A client with a larger body sends its Content-Length (every OpenAI SDK does).
 */
export function chunkedBodyLimit(maxBodyBytes: number, bufsize: number): number {
  return Math.min(maxBodyBytes, Math.floor(bufsize / 2));
}
/** Request headers of a body without Content-Length may take at most this share of the buffer. */
export const EDGE_MAX_HEADER_SHARE = 4;
/** How long the edge waits for a body without Content-Length to arrive (HAProxy answers 408 past it). */
export const EDGE_CHUNKED_WAIT_S = 10;
/**
 * Time a connection of the API frontend may take to send a request's headers, and may stay
 * idle between requests: a client holding connections open without sending (slowloris)
 * loses them within this.
 */
export const EDGE_HTTP_REQUEST_S = 5;
/** Default connections one source address may hold on the API frontend: at most a quarter of its `maxconn`. */
export const EDGE_CONNS_PER_SOURCE = 256;

/** The per-source connection limit a frontend of `maxconn` connections gets. */
export function edgeConnsPerSource(edge: Pick<HaproxyEdge, "connsPerSource">, frontendMaxconn: number): number {
  if (edge.connsPerSource === undefined) return Math.max(1, Math.min(EDGE_CONNS_PER_SOURCE, Math.floor(frontendMaxconn / 4)));
  const n = edge.connsPerSource;
  positive("connsPerSource", n);
  if (n >= frontendMaxconn) throw new EdgeMapError(`connsPerSource ${n} must stay below the frontend's maxconn ${frontendMaxconn}: one address would take the whole listener`);
  return n;
}

/** The frontend rules of the edge, in the order they must run. */
export function renderEdgeRules(proxy: string, edge: HaproxyEdge, frame: EdgeFrame): string[] {
  const maxBody = edge.maxBodyBytes ?? EDGE_DEFAULTS.maxBodyBytes;
  const unauth = edge.unauthPer10s;
  positive("maxBodyBytes", maxBody);
  if (unauth !== undefined) positive("unauthPer10s", unauth);
  if (!/^[A-Za-z0-9_./-]+$/.test(edge.keysMap)) throw new EdgeMapError(`keysMap ${JSON.stringify(edge.keysMap)} must be a plain path`);
  const conns = edgeConnsPerSource(edge, frame.frontendMaxconn);
  const chunked = chunkedBodyLimit(maxBody, frame.bufsize);
  const t = edgeTables(proxy);
  const routeAcls = EDGE_ROUTES.map((r, i) => `  acl edge_r${i} ${r.pattern ? `path_reg ${r.pattern}` : `path ${r.path}`}`);
  const anyRoute = EDGE_ROUTES.map((_, i) => `edge_r${i}`).join(" or ");
  const wrongMethod = EDGE_ROUTES.map((r, i) => `edge_r${i} ${r.methods.map((m) => `!{ method ${m} }`).join(" ")}`).join(" or ");
  const key = "txn.llmha_key";
  const tooLarge = answer(413, `request body larger than ${maxBody} bytes`, "invalid_request_error", "request_too_large");
  const tooLargeChunked = answer(413, `request body without Content-Length larger than ${chunked} bytes: send its Content-Length (up to ${maxBody} bytes)`, "invalid_request_error", "request_too_large");
  return [
    "  # llm-ha edge (contracts/haproxy-edge.ts): allow-list, client keys, limits, tenant header",
    // One address may hold a share of the listener, never all of it (idle connections held
    // open cost the proxy nothing but a slot each); its connections lose their slot when they
    // send no request within EDGE_HTTP_REQUEST_S.
    `  tcp-request connection track-sc1 src table ${t.src}`,
    `  tcp-request connection reject if { sc_conn_cur(1) gt ${conns} }`,
    `  timeout http-request ${EDGE_HTTP_REQUEST_S}s`,
    `  timeout http-keep-alive ${EDGE_HTTP_REQUEST_S}s`,
    ...routeAcls,
    "  acl edge_key var(txn.llmha_key) -m found",
    "  acl edge_sized req.hdr(content-length) -m found",
    // A tenant header only ever comes from here.
    `  http-request del-header ${TENANT_HEADER}`,
    // Routes match the raw path exactly; a path a server behind would resolve into another one
    // (dot segments, an encoded slash or dot, doubled slashes) is refused before any routing.
    answer(400, "the path must not hold dot segments, doubled slashes or percent-encoding", "invalid_request_error", "invalid_path") +
      " if { path -m sub /./ /../ // % } or { path -m end /. /.. }",
    answer(404, "no such route", "invalid_request_error", "not_found") + ` unless ${anyRoute}`,
    answer(405, "method not allowed on this route", "invalid_request_error", "method_not_allowed") + ` if ${wrongMethod}`,
    // A body of announced size is judged by its Content-Length; one without (chunked) is read
    // into the buffer first, up to one byte past its own limit, and judged by what arrived.
    `  http-request wait-for-body time ${EDGE_CHUNKED_WAIT_S}s at-least ${chunked + 1} unless edge_sized`,
    ...(edge.sinkAddress
      ? []
      : [tooLarge + ` if { req.hdr_val(content-length) gt ${maxBody} }`, tooLargeChunked + ` if !edge_sized { req.body_len gt ${chunked} } or !edge_sized { req.hdrs,length gt ${Math.floor(frame.bufsize / EDGE_MAX_HEADER_SHARE)} }`]),
    // One Authorization header, `Bearer <key>` with a sane key: only then a map lookup (of its hash).
    `  http-request set-var(${key}) req.hdr(authorization),word(2,' '),sha2(256),hex,lower,map(${edge.keysMap}) if { req.hdr_cnt(authorization) eq 1 } { req.hdr(authorization) -m reg -i '^Bearer ${CLIENT_KEY_RE.source.slice(1, -1)}$' }`,
    // A valid key is judged by its own limits first: a client behind an address shared with a
    // flood of requests without a key (a NAT) is never refused for the flood.
    ...keyLimitRules(t.keys, key),
    ...unauthRules(unauth),
    answer(401, "missing or invalid API key (Authorization: Bearer <key>)", "invalid_request_error", "invalid_api_key", " hdr WWW-Authenticate Bearer") + " unless edge_key",
    `  http-request set-header ${TENANT_HEADER} %[var(${key}),field(2,:)]`,
    // Client keys never go past the proxy; the servers get their own (backend rule).
    "  http-request del-header authorization",
    // Switching rules run after every http-request rule, wherever they stand: last, so it reads so.
    ...(edge.sinkAddress
      ? [
          `  use_backend ${t.sink} if { req.hdr_val(content-length) gt ${maxBody} }`,
          `  use_backend ${t.sink} if !edge_sized { req.body_len gt ${chunked} } or !edge_sized { req.hdrs,length gt ${Math.floor(frame.bufsize / EDGE_MAX_HEADER_SHARE)} }`,
        ]
      : []),
  ];
}

/**
 * Limits per key, in whole-second windows (`date`): the key's stick-table entry holds the
 * window it counts (`gpt0`) and the requests admitted in it (`gpc0`). A refused request is
 * not counted, so `Retry-After: 1` holds: the next second admits `rps` requests again, however
 * many were refused before it. Requests in flight are the entry's trackers (this one included).
 */
function keyLimitRules(table: string, key: string): string[] {
  return [
    `  http-request track-sc0 var(${key}),field(1,:) table ${table} if edge_key`,
    "  http-request set-var(txn.llmha_now) date if edge_key",
    // A new second: the count starts over (sc_clr_gpc0 clears as it is read).
    "  http-request set-var(txn.llmha_old) sc_clr_gpc0(0) if edge_key !{ sc_get_gpt0(0),sub(txn.llmha_now) eq 0 }",
    "  http-request sc-set-gpt0(0) var(txn.llmha_now) if edge_key",
    // The map value's fields are `<keyId>:<tenant>:<rps>:<concurrency>`; `sub` takes only a variable.
    `  http-request set-var(txn.llmha_rps) var(${key}),field(3,:) if edge_key`,
    `  http-request set-var(txn.llmha_conc) var(${key}),field(4,:) if edge_key`,
    answer(429, "rate limit of this API key reached", "rate_limit_error", "rate_limit_exceeded", " hdr Retry-After 1") + " if edge_key { sc_get_gpc0(0),sub(txn.llmha_rps) ge 0 }",
    answer(429, "requests in flight of this API key at their limit", "rate_limit_error", "rate_limit_exceeded", " hdr Retry-After 1") + " if edge_key { sc0_trackers,sub(txn.llmha_conc) gt 0 }",
    "  http-request sc-inc-gpc0(0) if edge_key",
  ];
}

/**
 * Requests without a valid key per source address, in fixed 10 s windows (`date,div(10)`),
 * counted on the connection's own tracker (sc1). Refused ones (429) are not counted, and
 * `Retry-After` is the time to the next window, when the address is admitted again.
 */
function unauthRules(unauth: number | undefined): string[] {
  if (unauth === undefined) return [];
  return [
    "  http-request set-var(txn.llmha_win) date,div(10) unless edge_key",
    "  http-request set-var(txn.llmha_old) sc_clr_gpc0(1) if !edge_key !{ sc_get_gpt0(1),sub(txn.llmha_win) eq 0 }",
    "  http-request sc-set-gpt0(1) var(txn.llmha_win) unless edge_key",
    answer(429, "too many requests without a valid API key from this address", "rate_limit_error", "unauthenticated_rate", ' hdr Retry-After "%[date,mod(10),neg,add(10)]"') +
      ` if !edge_key { sc_get_gpc0(1) ge ${unauth} }`,
    `  http-request sc-inc-gpc0(1) unless edge_key`,
  ];
}

function checkedAddress(a: string): string {
  if (!/^[A-Za-z0-9_.:[\]-]+:\d{1,5}$/.test(a)) throw new EdgeMapError(`sinkAddress ${JSON.stringify(a)} must be address:port`);
  return a;
}

/** The stick tables of one proxy's edge (backends without servers). */
export function renderEdgeTables(proxy: string, edge: HaproxyEdge): string[] {
  const size = edge.tableSize ?? EDGE_DEFAULTS.tableSize;
  positive("tableSize", size);
  const t = edgeTables(proxy);
  return [
    "",
    `backend ${t.keys}`,
    `  stick-table type string len 32 size ${size} expire 60s store gpc0,gpt0`,
    // Per source address: connections held (always), and the window of requests without a key.
    "",
    `backend ${t.src}`,
    `  stick-table type ipv6 size ${size} expire 60s store conn_cur,gpc0,gpt0`,
    ...(edge.sinkAddress ? ["", `backend ${t.sink}`, "  timeout server 60s", `  server sink ${checkedAddress(edge.sinkAddress)}`] : []),
  ];
}

/** The servers backend's rule: the inference servers' own key, from the proxy's environment. */
export function renderUpstreamKey(edge: HaproxyEdge | undefined): string[] {
  if (!edge?.upstreamKeyEnv) return [];
  if (!/^[A-Z_][A-Z0-9_]*$/.test(edge.upstreamKeyEnv)) throw new EdgeMapError(`upstreamKeyEnv ${JSON.stringify(edge.upstreamKeyEnv)} must be an environment variable name`);
  return [`  http-request set-header authorization "Bearer \${${edge.upstreamKeyEnv}}"`];
}
