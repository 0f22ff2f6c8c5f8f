/**
 * A proxy's backends over its inference servers, from the one generator (`haproxy-config.ts`):
 * the server lines every tier shares (checks, agent-check, live-traffic observation, the per-server
 * queue) and the backend around them — straight to the servers, and with the continuation relay
 * the same servers through the relay (its SOCKS4 hop).
 */
import { renderUpstreamKey } from "./haproxy-edge";
import { HaproxyConfigError, ms, type HaproxyTuning } from "./haproxy-tuning";
import type { HaproxyHealthMode, HaproxyProxy } from "./haproxy-config";

const NAME_RE = /^[A-Za-z0-9_.:-]+$/;

/** Options shared by every server line of a proxy: the heart of the L1 tier. */
export function serverOptions(health: HaproxyHealthMode, t: HaproxyTuning, agentPort: number, backup = false): string {
  // A GPU node serves a bounded batch: past `serverMaxconn` requests wait in the backend
  // queue (then a fast 503) instead of piling onto the node.
  const limit = `maxconn ${t.serverMaxconn}`;
  if (health === "httpchk-default") {
    // HAProxy's defaults: inter 2s, fall 3, rise 2.
    return `weight 100 check inter 2s fall 3 rise 2 ${limit}`;
  }
  if (health === "httpchk-tuned") {
    return `weight 100 check inter ${ms(t.checkInterMs)} fall ${t.fall} rise ${t.rise} ${limit}`;
  }
  const parts = [
    "weight 100",
    // A plain check catches a dead node: an agent HAProxy cannot reach counts for nothing.
    `check inter ${ms(t.checkInterMs)} fall ${backup ? t.backupFall : t.fall} rise ${t.rise}`,
    `agent-check agent-port ${agentPort} agent-inter ${ms(t.agentInterMs)}`,
    // A refused or reset connection in live traffic marks a local server down at once (a
    // crash is out of rotation in milliseconds). A backup is across the inter-AZ network,
    // where a connection lost now and then is the link, not the node: two in a row count as
    // one failed check, and `backupFall` of those take it out (the drill's cross-az-loss).
    backup ? "observe layer4 error-limit 2 on-error fail-check" : "observe layer4 error-limit 1 on-error mark-down",
  ];
  if (t.slowstartMs > 0) parts.push(`slowstart ${ms(t.slowstartMs)}`);
  parts.push(limit);
  return parts.join(" ");
}

export function checkName(what: string, value: string): void {
  if (!NAME_RE.test(value)) throw new HaproxyConfigError(`${what} ${JSON.stringify(value)} has characters HAProxy does not accept`);
}

function renderServers(p: HaproxyProxy, t: HaproxyTuning, extra = ""): string[] {
  const lines: string[] = [];
  const s = p.servers;
  if (s.kind === "static") {
    if (s.local.length + s.backup.length === 0) throw new HaproxyConfigError(`proxy ${p.name} has no servers`);
    for (const [list, backup] of [[s.local, false], [s.backup, true]] as const) {
      for (const srv of list) {
        checkName("server name", srv.name);
        const opts = serverOptions(p.health, t, srv.agentPort, backup);
        lines.push(`  server ${srv.name} ${srv.address}:${srv.port} ${opts}${extra}${backup ? " backup" : ""}`);
      }
    }
  } else {
    for (const [g, backup] of [[s.local, false], ...s.backup.map((b) => [b, true] as const)] as const) {
      checkName("server prefix", g.prefix);
      const opts = serverOptions(p.health, t, g.agentPort, backup);
      lines.push(
        `  server-template ${g.prefix} 1-${g.slots} ${g.fqdn}:${g.port} resolvers cluster init-addr none resolve-prefer ipv4 ${opts}${extra}${backup ? " backup" : ""}`,
      );
    }
  }
  return lines;
}

/**
 * A proxy's backend over its servers: `_servers` (straight to them), or with `hop` the relay's
 * address, `_relayed` (every connection through the relay: `socks4` on each server line).
 */
export function renderServersBackend(p: HaproxyProxy, t: HaproxyTuning, hop: string | null = null): string[] {
  const out = ["", `backend ${p.name}_${hop ? "relayed" : "servers"}`, "  balance leastconn"];
  const s = p.servers;
  // When every local server is down, spread over ALL the backups (the other AZs' nodes):
  // without it HAProxy sends everything to the first backup alone.
  if (s.backup.length > 0) out.push("  option allbackups");
  out.push(`  timeout connect ${ms(t.timeoutConnectMs)}`, `  timeout server ${ms(t.timeoutServerMs)}`, `  timeout queue ${ms(t.timeoutQueueMs)}`);
  out.push(`  retries ${t.retries}`, "  option redispatch 1");
  if (p.health === "agent") {
    // What is retried (once, on another server) is what a server did not take on:
    // conn-failure (refused or no connection: the request never reached it), 0rtt-rejected,
    // 404 (model unloaded) and 503 (loading) in the agent's ~0.3 s before the node leaves
    // rotation. Never empty-response or junk-response: a server that dropped the connection
    // after taking the request may have been killed BY it (a query of death); replaying it
    // would take down the next server too. A client asking for a model no server has gets
    // its 404 after the one retry.
    out.push("  retry-on conn-failure 0rtt-rejected 404 503", "  option http-buffer-request");
  } else {
    out.push("  option httpchk GET /health");
  }
  out.push(...renderUpstreamKey(p.edge));
  if (hop) {
    // The relay keeps no state between requests, reconnects a tunnel whose server closed its
    // side, and asks a request that still fails there again through the continuation listener:
    // any idle connection may take a new client's first request (`safe`, the default, opens a
    // new one for it: a SOCKS handshake and a connect each).
    out.push("  http-reuse always");
  }
  out.push(...renderServers(p, t, hop ? ` socks4 ${hop}` : ""));
  return out;
}
