/**
 * The zone's health at L1 (`GET /az/health`, what Route53 checks through the NLB and the
 * drill's PowerDNS checks): the backend over this AZ's agents, and the listener of its own
 * (`azHealthBind`) that serves nothing else. Rendered by the one generator (`haproxy-config.ts`).
 */
import type { HaproxyProxy } from "./haproxy-config";

/**
 * Connections one source address may hold on the `/az/health` listener. A checker makes one
 * request at a time (Route53: one connection per check, from many addresses); a client
 * holding idle connections open takes at most this many of the listener's slots.
 */
export const AZ_HEALTH_CONNS_PER_SOURCE = 4;
/**
 * Time a connection of the `/az/health` listener may take to send its request, or stay
 * silent: a held-open connection loses its slot within it, a checker's request takes
 * milliseconds. Route53 wants a status within 2 s of connecting.
 */
export const AZ_HEALTH_CLIENT_MS = 2000;

/** Connections the kernel queues for the `/az/health` listener before HAProxy accepts them. */
export const AZ_HEALTH_BACKLOG = 1024;

export function renderAzHealthBackend(p: HaproxyProxy): string[] {
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

/** The `/az/health` listener of its own (`azHealthBind`) and its table of connections per source address. */
export function renderAzHealthFrontend(p: HaproxyProxy & { azHealthBind: string }, maxconn: number): string[] {
  const table = `${p.name}_az_health_src`;
  return [
    "",
    `frontend ${p.name}_az_health`,
    `  bind ${p.azHealthBind}`,
    `  maxconn ${maxconn}`,
    // The kernel's queue of connections not yet accepted is `maxconn` long by default: a burst
    // from one address would overflow it and the checker's SYN be dropped (retried after 1 s).
    // A long one lets HAProxy take each and close those past the address's share.
    `  backlog ${AZ_HEALTH_BACKLOG}`,
    // One address cannot take the listener: past its share a new connection is closed as it
    // is accepted, and a silent one loses its slot within AZ_HEALTH_CLIENT_MS.
    `  tcp-request connection track-sc0 src table ${table}`,
    `  tcp-request connection reject if { sc_conn_cur(0) gt ${Math.min(AZ_HEALTH_CONNS_PER_SOURCE, Math.max(1, maxconn - 1))} }`,
    `  timeout http-request ${AZ_HEALTH_CLIENT_MS}ms`,
    `  timeout http-keep-alive ${AZ_HEALTH_CLIENT_MS}ms`,
    `  timeout client ${AZ_HEALTH_CLIENT_MS}ms`,
    // Only the zone's health: the agents' other pages stay off the public listener.
    `  http-request return status 404 unless { path /az/health } METH_GET`,
    // Healthy or not, nothing else: the agents' JSON (leader, fencing token, capacity) stays inside.
    `  http-response return status 200 content-type application/json string '{"healthy":true}' if { status 200 }`,
    `  http-response return status 503 content-type application/json string '{"healthy":false}' unless { status 200 }`,
    `  default_backend ${p.name}_az_health`,
    "",
    `backend ${table}`,
    `  stick-table type ipv6 size 100k expire 30s store conn_cur`,
  ];
}
