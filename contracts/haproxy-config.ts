/**
 * The one generator of HAProxy configuration (the L1 node tier and the L2 cross-zone
 * backups). The drill renders it from its list of local nodes; the infrastructure
 * renders it with DNS discovery (`server-template` + `resolvers` over a headless
 * Service per AZ). Both get the same server options, so what the drill measures is
 * what production runs.
 */

/** Health-check style of a proxy. `agent` is llm-ha's; the others are the baselines it is measured against. */
export type HaproxyHealthMode = "agent" | "httpchk-default" | "httpchk-tuned";

export interface HaproxyTuning {
  /** Plain `check` interval (catches a dead node). Default 500 ms. */
  checkInterMs: number;
  /** Consecutive failed checks to mark DOWN. Default 2. */
  fall: number;
  /** Consecutive passed checks to mark UP again. Default 2. */
  rise: number;
  /** How often HAProxy asks the agent. Default 500 ms. */
  agentInterMs: number;
  /** HAProxy's own ramp after a server comes back UP; 0 turns it off. Default 5000 ms. */
  slowstartMs: number;
  /** Retries of a request on another server. Default 3. */
  retries: number;
  /** Default 1000 ms. */
  timeoutConnectMs: number;
  /** Time to first response byte; completions can be long. Default 120000 ms. */
  timeoutServerMs: number;
  /** Default 120000 ms. */
  timeoutClientMs: number;
}

export const DEFAULT_HAPROXY_TUNING: Readonly<HaproxyTuning> = Object.freeze({
  checkInterMs: 500,
  fall: 2,
  rise: 2,
  agentInterMs: 500,
  slowstartMs: 5000,
  retries: 3,
  timeoutConnectMs: 1000,
  timeoutServerMs: 120_000,
  timeoutClientMs: 120_000,
});

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
  tuning?: Partial<HaproxyTuning>;
}

export interface HaproxyConfigArgs {
  /** Admin stats socket path (`show stat`). */
  statsSocket?: string;
  /** `address:port` of the HTTP stats page and `/healthz` of the proxy itself. */
  monitorBind?: string;
  /** Serve HAProxy's built-in Prometheus exporter at `/metrics` on `monitorBind`. Default false. */
  prometheusExporter?: boolean;
  /** DNS servers for `dns` servers; omitted means `parse-resolv-conf`. */
  nameservers?: string[];
  /** Run in the foreground as the current user (the drill); in a container HAProxy runs as PID 1 anyway. */
  maxconn?: number;
  proxies: HaproxyProxy[];
}

const NAME_RE = /^[A-Za-z0-9_.:-]+$/;

/** Thrown when the generator is asked for a configuration HAProxy would refuse. */
export class HaproxyConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HaproxyConfigError";
  }
}

function ms(v: number): string {
  return `${Math.round(v)}ms`;
}

/** Options shared by every server line of a proxy: the heart of the L1 tier. */
export function serverOptions(health: HaproxyHealthMode, t: HaproxyTuning, agentPort: number): string {
  if (health === "httpchk-default") {
    // HAProxy's defaults: inter 2s, fall 3, rise 2.
    return "weight 100 check inter 2s fall 3 rise 2";
  }
  if (health === "httpchk-tuned") {
    return `weight 100 check inter ${ms(t.checkInterMs)} fall ${t.fall} rise ${t.rise}`;
  }
  const parts = [
    "weight 100",
    // A plain check catches a dead node: an agent HAProxy cannot reach counts for nothing.
    `check inter ${ms(t.checkInterMs)} fall ${t.fall} rise ${t.rise}`,
    `agent-check agent-port ${agentPort} agent-inter ${ms(t.agentInterMs)}`,
    // A refused or reset connection in live traffic marks the server down at once.
    "observe layer4 error-limit 1 on-error mark-down",
  ];
  if (t.slowstartMs > 0) parts.push(`slowstart ${ms(t.slowstartMs)}`);
  return parts.join(" ");
}

function checkName(what: string, value: string): void {
  if (!NAME_RE.test(value)) throw new HaproxyConfigError(`${what} ${JSON.stringify(value)} has characters HAProxy does not accept`);
}

function renderServers(p: HaproxyProxy, t: HaproxyTuning): string[] {
  const lines: string[] = [];
  const s = p.servers;
  if (s.kind === "static") {
    if (s.local.length + s.backup.length === 0) throw new HaproxyConfigError(`proxy ${p.name} has no servers`);
    for (const [list, backup] of [[s.local, false], [s.backup, true]] as const) {
      for (const srv of list) {
        checkName("server name", srv.name);
        const opts = serverOptions(p.health, t, srv.agentPort);
        lines.push(`  server ${srv.name} ${srv.address}:${srv.port} ${opts}${backup ? " backup" : ""}`);
      }
    }
  } else {
    for (const [g, backup] of [[s.local, false], ...s.backup.map((b) => [b, true] as const)] as const) {
      checkName("server prefix", g.prefix);
      const opts = serverOptions(p.health, t, g.agentPort);
      lines.push(
        `  server-template ${g.prefix} 1-${g.slots} ${g.fqdn}:${g.port} resolvers cluster init-addr none resolve-prefer ipv4 ${opts}${backup ? " backup" : ""}`,
      );
    }
  }
  return lines;
}

function renderAzHealthBackend(p: HaproxyProxy): string[] {
  const lines = [
    `backend ${p.name}_az_health`,
    "  mode http",
    "  balance roundrobin",
    "  option httpchk GET /livez",
    // The checker (Route53: a status within 2 s of connecting; PowerDNS ifurlup: 2 s) must get
    // an answer even when one agent is frozen (SIGSTOP, a stuck event loop): each try gets
    // 800 ms (an agent answers in ≤ 300 ms, failing open on a slow Redis), then one other agent.
    "  retries 1",
    "  option redispatch 1",
    "  retry-on conn-failure empty-response response-timeout",
    "  timeout server 800ms",
    "  timeout check 500ms",
  ];
  const s = p.servers;
  if (s.kind === "static") {
    for (const srv of s.local) lines.push(`  server ${srv.name} ${srv.address}:${srv.httpPort} check inter 1s fall 2 rise 1`);
  } else {
    const g = s.local;
    lines.push(
      `  server-template ${g.prefix}-agent 1-${g.slots} ${g.fqdn}:${g.httpPort} resolvers cluster init-addr none resolve-prefer ipv4 check inter 1s fall 2 rise 1`,
    );
  }
  return lines;
}

/** Renders a complete `haproxy.cfg`. Throws `HaproxyConfigError` for input HAProxy would refuse. */
export function renderHaproxyConfig(args: HaproxyConfigArgs): string {
  if (args.proxies.length === 0) throw new HaproxyConfigError("no proxies to render");
  const out: string[] = ["# Generated by llm-ha (contracts/haproxy-config.ts); do not edit by hand.", "global"];
  out.push(`  maxconn ${args.maxconn ?? 4096}`);
  if (args.statsSocket) out.push(`  stats socket ${args.statsSocket} mode 600 level admin`);
  out.push(
    "",
    "defaults",
    "  mode http",
    "  option http-keep-alive",
    "  option dontlognull",
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
    out.push("", "frontend monitor", `  bind ${args.monitorBind}`, "  monitor-uri /healthz", "  stats enable", "  stats uri /stats", "  stats refresh 5s");
    // Built into Debian's and the official images' HAProxy (USE_PROMEX): failed requests at L1.
    if (args.prometheusExporter) out.push("  http-request use-service prometheus-exporter if { path /metrics }");
  } else if (args.prometheusExporter) {
    throw new HaproxyConfigError("prometheusExporter needs monitorBind");
  }
  const names = new Set<string>();
  for (const p of args.proxies) {
    checkName("proxy name", p.name);
    if (names.has(p.name)) throw new HaproxyConfigError(`proxy name ${p.name} is used twice`);
    names.add(p.name);
    const t: HaproxyTuning = { ...DEFAULT_HAPROXY_TUNING, ...p.tuning };
    out.push("", `frontend ${p.name}`, `  bind ${p.bind}`, `  timeout client ${ms(t.timeoutClientMs)}`);
    if (p.forwardAzHealth) {
      out.push(`  use_backend ${p.name}_az_health if { path /az/health } METH_GET`);
    }
    out.push(`  default_backend ${p.name}_servers`, "", `backend ${p.name}_servers`, "  balance leastconn");
    out.push(`  timeout connect ${ms(t.timeoutConnectMs)}`, `  timeout server ${ms(t.timeoutServerMs)}`);
    out.push(`  retries ${t.retries}`, "  option redispatch 1");
    if (p.health === "agent") {
      // Replays a request whose server died under it (crash mid-request): zero failed requests.
      // 404 and 503 too: a server whose model was unloaded (404 "model not found") or that is
      // loading (503) did not serve the request; another server can, in the agent's ~0.3 s
      // before the node leaves rotation. A client asking for a model no server has gets its
      // 404 after the retries (each a cheap refusal).
      out.push("  retry-on conn-failure empty-response junk-response 0rtt-rejected 404 503", "  option http-buffer-request");
    } else {
      out.push("  option httpchk GET /health");
    }
    out.push(...renderServers(p, t));
    if (p.forwardAzHealth) out.push("", ...renderAzHealthBackend(p));
  }
  return out.join("\n") + "\n";
}
