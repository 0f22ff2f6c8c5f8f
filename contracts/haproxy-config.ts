/**
 * The one generator of HAProxy configuration (the L1 node tier and the L2 cross-zone
 * backups). The drill renders it from its list of local nodes; the infrastructure
 * renders it with DNS discovery (`server-template` + `resolvers` over a headless
 * Service per AZ). Both get the same server options, so what the drill measures is
 * what production runs.
 */

import {
  BASELINE_HAPROXY_TUNING,
  DEFAULT_HAPROXY_GLOBALS,
  DEFAULT_HAPROXY_TUNING,
  frontendMaxconn,
  hardStopAfterMs,
  healthReserve,
  type HaproxyGlobals,
  type HaproxyTuning,
  HaproxyConfigError,
  ms,
} from "./haproxy-tuning";
import { RESULT_ROUTE_PATTERN } from "./edge";
import { renderAzHealthBackend, renderAzHealthFrontend } from "./haproxy-az-health";
import { renderEdgeRules, renderEdgeTables, type HaproxyEdge } from "./haproxy-edge";
import { renderContinuation, renderContinuationRoute, renderFallbackBackend, socksHop, type HaproxyContinuation, type HaproxyFallback } from "./haproxy-sidecars";
import { checkName, renderServersBackend } from "./haproxy-servers";

export { serverOptions } from "./haproxy-servers";

export type { HaproxyContinuation, HaproxyFallback } from "./haproxy-sidecars";

// The settings live in their own file; importers of the generator keep finding them here.
export {
  BASELINE_HAPROXY_TUNING,
  BUFFERS_PER_STREAM,
  DEFAULT_HAPROXY_GLOBALS,
  DEFAULT_HAPROXY_TUNING,
  frontendMaxconn,
  HARD_STOP_MARGIN_MS,
  haproxyBufferBytes,
  hardStopAfterMs,
  healthReserve,
  type HaproxyGlobals,
  type HaproxyTuning,
  HaproxyConfigError,
} from "./haproxy-tuning";

/** Health-check style of a proxy. `agent` is llm-ha's; the others are the baselines it is measured against. */
export type HaproxyHealthMode = "agent" | "httpchk-default" | "httpchk-tuned";

/** One inference node, listed by address (the drill). */
export interface HaproxyStaticServer {
  /** Server name in HAProxy (the node id). */
  name: string;
  address: string;
  /** Inference server port. */
  port: number;
  /** llm-ha agent-check port (`LLMHA_AGENT_CHECK_PORT`). */
  agentPort: number;
  /** llm-ha HTTP port (`LLMHA_HTTP_PORT`), for forwarding `/az/health`. */
  httpPort: number;
}

/** Nodes discovered through DNS (Kubernetes headless Service per AZ). */
export interface HaproxyDnsGroup {
  /** Prefix of the generated server names. */
  prefix: string;
  /** FQDN of the headless Service. */
  fqdn: string;
  /** Server slots `server-template` pre-allocates; at least the AZ's maximum node count. */
  slots: number;
  port: number;
  agentPort: number;
  httpPort: number;
}

export type HaproxyServers =
  | { kind: "static"; local: HaproxyStaticServer[]; backup: HaproxyStaticServer[] }
  | { kind: "dns"; local: HaproxyDnsGroup; backup: HaproxyDnsGroup[] };

export interface HaproxyProxy {
  /** Name of the frontend/backend pair, e.g. `inference` or `baseline_default`. */
  name: string;
  /** `address:port` clients connect to, e.g. `127.0.0.1:18080` or `:8080`. */
  bind: string;
  health: HaproxyHealthMode;
  servers: HaproxyServers;
  /** Forward `GET /az/health` to this AZ's agents (what Route53 checks through the NLB). Default false. */
  forwardAzHealth?: boolean;
  /**
   * `address:port` of a listener of its own that serves only `GET /az/health` (needs
   * `forwardAzHealth`): a full inference frontend does not hold up the zone's health check.
   * `/az/health` on `bind` keeps working too. Default none.
   */
  azHealthBind?: string;
  /** Per-proxy settings; omitted ones take `DEFAULT_HAPROXY_TUNING`. */
  tuning?: Partial<HaproxyTuning>;
  /**
   * The L4 fallback (`llm-ha fallback`): requests go to it only while no inference server of
   * this proxy, local or backup, is usable (`nbsrv` of the servers backend is 0). Default none.
   */
  fallback?: HaproxyFallback;
  /**
   * The public edge (`haproxy-edge.ts`): allow-list, client API keys, limits per key, the
   * tenant header. `/az/health` is then served only on `azHealthBind`. Default none (the
   * drill's baselines; a proxy nobody outside reaches).
   */
  edge?: HaproxyEdge;
  /**
   * `address:port` (loopback) of a frontend without the edge for the pod's own `llm-ha fallback`:
   * its replays act for the tenant that queued them (it sets the tenant header itself) and reach
   * the servers, never the fallback. Reachable only inside the pod. Default none.
   */
  internalBind?: string;
  /**
   * The continuation relay (`llm-ha continue`, docs/continuation.md): completions go through it
   * so an answer whose server dies is carried on by another. Each such request then holds two
   * frontend connections, so both frontends get half the frontend maxconn. Default none.
   */
  continuation?: HaproxyContinuation;
}

export interface HaproxyConfigArgs {
  /** Admin stats socket path (`show stat`). */
  statsSocket?: string;
  /**
   * A second runtime socket at `level user`, for `llm-ha edge-sync`: on HAProxy 2.6 that level
   * may `add map`/`set map`/`del map` (measured), while `show env` (the servers' API key in the
   * environment) needs `operator` and is refused. The admin socket stays for the operator,
   * the tests and the drill. Default none.
   */
  mapSocket?: string;
  /** `address:port` of `/healthz` of the proxy itself (and of the HTTP stats page without `statsBind`). */
  monitorBind?: string;
  /** `address:port` of the stats page (`/stats`) alone (loopback: `kubectl port-forward`). Default none: on `monitorBind`. */
  statsBind?: string;
  /** Serve HAProxy's built-in Prometheus exporter at `/metrics` on `monitorBind`. Default false. */
  prometheusExporter?: boolean;
  /** DNS servers for `dns` servers; omitted means `parse-resolv-conf`. */
  nameservers?: string[];
  /** Global `maxconn`: concurrent client connections of the process. Default `DEFAULT_HAPROXY_GLOBALS.maxconn` (2048). */
  maxconn?: number;
  /** `tune.bufsize` in bytes: the largest request HAProxy can retry. Default `DEFAULT_HAPROXY_GLOBALS.bufsize` (131072). */
  bufsize?: number;
  /**
   * `nbthread`: HAProxy's worker threads. Default none: HAProxy starts one per CPU it may run
   * on, which in a container is every CPU of the node, whatever the pod was given.
   */
  nbthread?: number;
  /** Connections kept for the monitor and `/az/health` listeners. Default `DEFAULT_HAPROXY_GLOBALS.healthConns` (64). */
  healthConns?: number;
  /**
   * `hard-stop-after`: how long a soft-stopped (SIGUSR1) HAProxy waits for requests in
   * flight. Default `hardStopAfterMs(...)`: the longest proxy timeout plus 10 s.
   */
  hardStopAfterMs?: number;
  proxies: HaproxyProxy[];
}

function positiveInt(what: string, v: number, min = 1): void {
  if (!Number.isInteger(v) || v < min) throw new HaproxyConfigError(`${what} ${v} must be an integer ≥ ${min}`);
}

/** The process-wide settings with their defaults, checked. */
function globalsOf(args: HaproxyConfigArgs): HaproxyGlobals {
  const g: HaproxyGlobals = {
    maxconn: args.maxconn ?? DEFAULT_HAPROXY_GLOBALS.maxconn,
    bufsize: args.bufsize ?? DEFAULT_HAPROXY_GLOBALS.bufsize,
    healthConns: args.healthConns ?? DEFAULT_HAPROXY_GLOBALS.healthConns,
  };
  positiveInt("maxconn", g.maxconn, 2);
  // HAProxy's own floor; below it ordinary request headers no longer fit.
  positiveInt("bufsize", g.bufsize, 16_384);
  positiveInt("healthConns", g.healthConns, 2);
  return g;
}

function tuningOf(p: Pick<HaproxyProxy, "health" | "tuning">): HaproxyTuning {
  return { ...DEFAULT_HAPROXY_TUNING, ...(p.health === "agent" ? {} : BASELINE_HAPROXY_TUNING), ...p.tuning };
}

function feMaxOf(p: Pick<HaproxyProxy, "continuation">, t: HaproxyTuning, g: HaproxyGlobals): number {
  return p.continuation && t.frontendMaxconn === undefined ? Math.floor(frontendMaxconn(t, g) / 2) : frontendMaxconn(t, g);
}

/**
 * The `maxconn` of a proxy's inference frontend, and of its continuation listener when it has
 * one: what the relay's pool toward that listener is sized to (`LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS`).
 */
export function proxyFrontendMaxconn(p: Pick<HaproxyProxy, "health" | "tuning" | "continuation">, args: Pick<HaproxyConfigArgs, "maxconn" | "bufsize" | "healthConns">): number {
  return feMaxOf(p, tuningOf(p), globalsOf({ ...args, proxies: [] }));
}

/** The inference frontend, its optional `/az/health` listener, and its backends. */
function renderProxy(p: HaproxyProxy, g: HaproxyGlobals): string[] {
  const t = tuningOf(p);
  const feMax = feMaxOf(p, t, g);
  positiveInt(`frontendMaxconn of ${p.name}`, feMax);
  if (feMax >= g.maxconn) throw new HaproxyConfigError(`frontendMaxconn ${feMax} of ${p.name} must stay below the global maxconn ${g.maxconn}`);
  positiveInt(`serverMaxconn of ${p.name}`, t.serverMaxconn);
  positiveInt(`retries of ${p.name}`, t.retries, 0);
  if (p.edge && !p.azHealthBind && p.forwardAzHealth) throw new HaproxyConfigError(`the edge of ${p.name} serves /az/health only on azHealthBind: set it`);
  if (p.azHealthBind && !p.forwardAzHealth) throw new HaproxyConfigError(`azHealthBind of ${p.name} needs forwardAzHealth`);
  const out = ["", `frontend ${p.name}`, `  bind ${p.bind}`];
  // Below the global maxconn: a full inference frontend stops accepting, the health
  // listeners (monitor, /az/health) still do.
  out.push(`  maxconn ${feMax}`, `  timeout client ${ms(t.timeoutClientMs)}`);
  // A 503 (queue full past timeout queue, no server left, a server refusing) says when to
  // come back; a server's own Retry-After is kept.
  out.push(`  http-after-response set-header Retry-After ${t.retryAfterS} if { status 503 } !{ res.hdr(retry-after) -m found }`);
  if (p.edge) out.push(...renderEdgeRules(p.name, p.edge, { bufsize: g.bufsize, frontendMaxconn: feMax }));
  else if (p.forwardAzHealth) {
    out.push(`  use_backend ${p.name}_az_health if { path /az/health } METH_GET`);
  }
  if (p.fallback) {
    // The L4 result route belongs to the fallback at every tier: results exist exactly when
    // the fleet is back, and an inference server would answer it 404.
    out.push(`  use_backend ${p.name}_fallback if { path_reg ${RESULT_ROUTE_PATTERN} } METH_GET`);
    // nbsrv counts the usable local servers, or when there are none the usable backups: 0
    // means no inference server anywhere can take the request.
    out.push(`  use_backend ${p.name}_fallback if { nbsrv(${p.name}_servers) eq 0 }`);
  }
  // The relay as HAProxy's SOCKS4 hop (docs/continuation.md): completions to the same servers,
  // picked here by the same rules, each connection made through the relay.
  const hop = p.continuation ? socksHop(p.name, p.continuation) : null;
  if (p.continuation) out.push(...renderContinuationRoute(p.name, hop !== null));
  out.push(`  default_backend ${p.name}_servers`);
  if (p.continuation) out.push(...renderContinuation(p.name, p.continuation, t, feMax));
  if (p.azHealthBind) out.push(...renderAzHealthFrontend({ ...p, azHealthBind: p.azHealthBind }, Math.max(1, Math.floor(healthReserve(g) / 2))));
  if (p.internalBind) {
    if (!/^(127\.\d+\.\d+\.\d+|\[::1\]):\d{1,5}$/.test(p.internalBind)) throw new HaproxyConfigError(`internalBind ${JSON.stringify(p.internalBind)} of ${p.name} must be a loopback address:port`);
    out.push("", `frontend ${p.name}_internal`, `  bind ${p.internalBind}`, `  maxconn ${Math.max(1, Math.floor(healthReserve(g) / 2))}`, `  timeout client ${ms(t.timeoutClientMs)}`, `  default_backend ${p.name}_servers`);
  }
  out.push(...renderServersBackend(p, t));
  if (hop) out.push(...renderServersBackend(p, t, hop));
  if (p.forwardAzHealth) out.push("", ...renderAzHealthBackend(p));
  if (p.fallback) out.push("", ...renderFallbackBackend(p.name, p.fallback));
  if (p.edge) out.push(...renderEdgeTables(p.name, p.edge));
  return out;
}

/** Renders a complete `haproxy.cfg`. Throws `HaproxyConfigError` for input HAProxy would refuse. */
const STATS_PAGE = ["  stats enable", "  stats uri /stats", "  stats refresh 5s"];

export function renderHaproxyConfig(args: HaproxyConfigArgs): string {
  if (args.proxies.length === 0) throw new HaproxyConfigError("no proxies to render");
  const g = globalsOf(args);
  const hardStop = args.hardStopAfterMs ?? hardStopAfterMs(args.proxies.map((p) => p.tuning ?? {}));
  positiveInt("hardStopAfterMs", hardStop);
  const out: string[] = ["# Generated by llm-ha (contracts/haproxy-config.ts); do not edit by hand.", "global"];
  out.push(`  maxconn ${g.maxconn}`);
  if (args.nbthread !== undefined) {
    positiveInt("nbthread", args.nbthread);
    out.push(`  nbthread ${args.nbthread}`);
  }
  // A request is retried only while it fits in one buffer (the prompt included).
  out.push(`  tune.bufsize ${g.bufsize}`);
  // After a soft stop (SIGUSR1, the image's stop signal) requests in flight may finish.
  out.push(`  hard-stop-after ${ms(hardStop)}`);
  if (args.statsSocket) out.push(`  stats socket ${args.statsSocket} mode 600 level admin`);
  if (args.mapSocket) out.push(`  stats socket ${args.mapSocket} mode 600 level user`);
  out.push(
    "",
    "defaults",
    "  mode http",
    "  option http-keep-alive",
    "  option dontlognull",
    // A client that goes away stops the server's work (the generation) at once. On 2.6 the
    // frontend must have it too (it keeps reading the client), and a frontend can only
    // inherit it from defaults.
    "  option abortonclose",
    // Tokens are streamed a few bytes at a time: without it HAProxy sends with MSG_MORE and the
    // kernel holds each small chunk up to 200 ms (measured: +206 ms per chunk and to the first
    // token, per HAProxy on the path; lab/bench/continuation.ts).
    "  option http-no-delay",
    "  timeout http-request 10s",
    "  timeout queue 5s",
    "  timeout connect 1s",
    "  timeout client 30s",
    "  timeout server 30s",
  );
  const usesDns = args.proxies.some((p) => p.servers.kind === "dns");
  if (usesDns) {
    out.push("", "resolvers cluster");
    if (args.nameservers?.length) args.nameservers.forEach((ns, i) => out.push(`  nameserver ns${i + 1} ${ns}`));
    else out.push("  parse-resolv-conf");
    out.push("  hold valid 5s", "  hold obsolete 10s", "  accepted_payload_size 8192");
  }
  if (args.monitorBind) {
    out.push("", "frontend monitor", `  bind ${args.monitorBind}`, `  maxconn ${Math.max(1, Math.floor(healthReserve(g) / 2))}`);
    out.push("  monitor-uri /healthz");
    if (!args.statsBind) out.push(...STATS_PAGE);
    // Built into Debian's and the official images' HAProxy (USE_PROMEX): failed requests at L1.
    if (args.prometheusExporter) out.push("  http-request use-service prometheus-exporter if { path /metrics }");
  } else if (args.prometheusExporter) {
    throw new HaproxyConfigError("prometheusExporter needs monitorBind");
  }
  // The stats page names every server and its state: a listener of its own can stay off the network.
  if (args.statsBind) out.push("", "frontend stats", `  bind ${args.statsBind}`, "  maxconn 4", ...STATS_PAGE);
  const names = new Set<string>();
  for (const p of args.proxies) {
    checkName("proxy name", p.name);
    if (names.has(p.name)) throw new HaproxyConfigError(`proxy name ${p.name} is used twice`);
    names.add(p.name);
    out.push(...renderProxy(p, g));
  }
  return out.join("\n") + "\n";
}
