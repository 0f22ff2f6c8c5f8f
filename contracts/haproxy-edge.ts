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
  /** Largest request body (`Content-Length`) in bytes; past it `413`. Default 8 MiB. */
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

/** The frontend rules of the edge, in the order they must run. */
export function renderEdgeRules(proxy: string, edge: HaproxyEdge): string[] {
  const maxBody = edge.maxBodyBytes ?? EDGE_DEFAULTS.maxBodyBytes;
  const unauth = edge.unauthPer10s;
  positive("maxBodyBytes", maxBody);
  if (unauth !== undefined) positive("unauthPer10s", unauth);
  if (!/^[A-Za-z0-9_./-]+$/.test(edge.keysMap)) throw new EdgeMapError(`keysMap ${JSON.stringify(edge.keysMap)} must be a plain path`);
  const t = edgeTables(proxy);
  const routeAcls = EDGE_ROUTES.map((r, i) => `  acl edge_r${i} ${r.prefix ? "path_beg" : "path"} ${r.path}`);
  const anyRoute = EDGE_ROUTES.map((_, i) => `edge_r${i}`).join(" or ");
  const wrongMethod = EDGE_ROUTES.map((r, i) => `edge_r${i} ${r.methods.map((m) => `!{ method ${m} }`).join(" ")}`).join(" or ");
  const key = "txn.llmha_key";
  return [
    "  # llm-ha edge (contracts/haproxy-edge.ts): allow-list, client keys, limits, tenant header",
    ...routeAcls,
    // A tenant header only ever comes from here.
    `  http-request del-header ${TENANT_HEADER}`,
    ...(unauth === undefined
      ? []
      : [
          `  http-request track-sc1 src table ${t.src}`,
          answer(429, "too many requests without a valid API key from this address", "rate_limit_error", "unauthenticated_rate", " hdr Retry-After 10") +
            ` if { sc_gpc0_rate(1) gt ${unauth} }`,
        ]),
    answer(404, "no such route", "invalid_request_error", "not_found") + ` unless ${anyRoute}`,
    answer(405, "method not allowed on this route", "invalid_request_error", "method_not_allowed") + ` if ${wrongMethod}`,
    ...(edge.sinkAddress
      ? [`  use_backend ${t.sink} if { req.hdr_val(content-length) gt ${maxBody} }`]
      : [answer(413, `request body larger than ${maxBody} bytes`, "invalid_request_error", "request_too_large") + ` if { req.hdr_val(content-length) gt ${maxBody} }`]),
    // One Authorization header, `Bearer <key>` with a sane key: only then a map lookup (of its hash).
    `  http-request set-var(${key}) req.hdr(authorization),word(2,' '),sha2(256),hex,lower,map(${edge.keysMap}) if { req.hdr_cnt(authorization) eq 1 } { req.hdr(authorization) -m reg -i '^Bearer ${CLIENT_KEY_RE.source.slice(1, -1)}$' }`,
    ...(unauth === undefined ? [] : [`  http-request sc-inc-gpc0(1) unless { var(${key}) -m found }`]),
    answer(401, "missing or invalid API key (Authorization: Bearer <key>)", "invalid_request_error", "invalid_api_key", " hdr WWW-Authenticate Bearer") +
      ` unless { var(${key}) -m found }`,
    // The map value is read where it is used (a variable each costs a rule): its fields are
    // `<keyId>:<tenant>:<rps>:<concurrency>`; `sub` takes only a variable, so the limits get one.
    `  http-request track-sc0 var(${key}),field(1,:) table ${t.keys}`,
    `  http-request set-var(txn.llmha_rps) var(${key}),field(3,:)`,
    `  http-request set-var(txn.llmha_conc) var(${key}),field(4,:)`,
    // Limits per key: over the rate of the last second, or more in flight (this one included) than allowed.
    answer(429, "rate limit of this API key reached", "rate_limit_error", "rate_limit_exceeded", " hdr Retry-After 1") +
      " if { sc_http_req_rate(0),sub(txn.llmha_rps) gt 0 } or { sc0_trackers,sub(txn.llmha_conc) gt 0 }",
    `  http-request set-header ${TENANT_HEADER} %[var(${key}),field(2,:)]`,
    // Client keys never go past the proxy; the servers get their own (backend rule).
    "  http-request del-header authorization",
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
    `  stick-table type string len 32 size ${size} expire 60s store http_req_rate(1s)`,
    ...(edge.unauthPer10s === undefined ? [] : ["", `backend ${t.src}`, `  stick-table type ipv6 size ${size} expire 60s store gpc0,gpc0_rate(10s)`]),
    ...(edge.sinkAddress ? ["", `backend ${t.sink}`, "  timeout server 60s", `  server sink ${checkedAddress(edge.sinkAddress)}`] : []),
  ];
}

/** The servers backend's rule: the inference servers' own key, from the proxy's environment. */
export function renderUpstreamKey(edge: HaproxyEdge | undefined): string[] {
  if (!edge?.upstreamKeyEnv) return [];
  if (!/^[A-Z_][A-Z0-9_]*$/.test(edge.upstreamKeyEnv)) throw new EdgeMapError(`upstreamKeyEnv ${JSON.stringify(edge.upstreamKeyEnv)} must be an environment variable name`);
  return [`  http-request set-header authorization "Bearer \${${edge.upstreamKeyEnv}}"`];
}
