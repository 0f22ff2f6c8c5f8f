/**
 * What the one generator (`haproxy-config.ts`) renders for the two services beside HAProxy in
 * the L1 pod: the L4 fallback (`llm-ha fallback`) and the continuation relay (`llm-ha
 * continue`, docs/continuation.md), each a loopback backend of its own.
 */
import { CONTINUE_IDLE, MAX_CONTINUE_WORKERS, relayWorkerAddress } from "./continuation";
import { PROXY_ANSWER_HEADER } from "./edge";
import { HaproxyConfigError, ms } from "./haproxy-tuning";

/** Where `llm-ha fallback` listens, beside the proxy. */
export interface HaproxyFallback {
  /** `address:port`, e.g. `127.0.0.1:9410` (a container in the proxy's pod). */
  address: string;
  /** `timeout server` toward it; a provider's answer or a Kafka ack must fit. Default 60000 ms. */
  timeoutServerMs?: number;
}

/**
 * The continuation relay: completions go from the public frontend (after the edge) through
 * `llm-ha continue` to the server HAProxy picked (the relay as its SOCKS4 hop), and the relay
 * carries an answer on when its server dies under it, through a loopback listener of its own
 * over the same servers.
 */
export interface HaproxyContinuation {
  /**
   * `address:port` of `llm-ha continue` (`LLMHA_CONTINUE_PORT`), e.g. `127.0.0.1:9420`: a loopback
   * address with one worker (HAProxy's `socks4` takes TCP). With several workers also `unix@/path`
   * of its Unix socket (`LLMHA_CONTINUE_SOCKET`).
   */
  relay: string;
  /**
   * Loopback `address:port` of the listener the relay sends to (`LLMHA_CONTINUE_UPSTREAM`), e.g.
   * `127.0.0.1:9422`, or `unix@/path` of a Unix socket (the L1 pod: a volume both containers mount).
   */
  bind: string;
  /**
   * Relay processes (`LLMHA_CONTINUE_WORKERS`), each on a listener of its own derived from `relay`
   * (`relayWorkerAddress`). Default 1: `relay` itself. Above 1 the relay's backend lists one server
   * per worker and balances by `leastconn`: HAProxy counts each worker's open streams itself.
   */
  workers?: number;
}

const ADDR_RE = /^[A-Za-z0-9_.:[\]-]+:\d{1,5}$/;
const LOOPBACK_RE = /^(127\.\d+\.\d+\.\d+|\[::1\]):\d{1,5}$/;
/** A Unix socket in HAProxy's syntax; the path as the relay's config takes it (absolute, ≤ 100 bytes, no spaces). */
const UNIX_RE = /^unix@\/[^\s]{1,99}$/;

export function renderFallbackBackend(name: string, f: HaproxyFallback): string[] {
  if (!ADDR_RE.test(f.address)) throw new HaproxyConfigError(`fallback address ${JSON.stringify(f.address)} of ${name} must be address:port`);
  const timeout = f.timeoutServerMs ?? 60_000;
  if (!Number.isInteger(timeout) || timeout < 1) throw new HaproxyConfigError(`fallback timeoutServerMs ${timeout} of ${name} must be an integer ≥ 1`);
  return [
    `backend ${name}_fallback`,
    "  mode http",
    "  timeout connect 1s",
    `  timeout server ${ms(timeout)}`,
    "  retries 1",
    "  retry-on conn-failure",
    `  server fallback ${f.address} check inter 1s fall 2 rise 1`,
  ];
}

/**
 * The relay's address as HAProxy's SOCKS4 hop to the servers (`socks4` on the server lines of
 * the `_relayed` backend), or null when completions go to the relay's own backend instead. One
 * relay process (the default) is the hop: a completion crosses it once each way and HAProxy
 * once, and HAProxy still picks the server. `socks4` takes one TCP address, so several workers
 * (each on a listener of its own) take the other way: HAProxy → a worker by `leastconn` →
 * HAProxy's continuation listener → the server, HAProxy crossed twice.
 */
export function socksHop(name: string, c: HaproxyContinuation): string | null {
  if ((c.workers ?? 1) > 1) return null;
  // IPv4 loopback only: what `socks4` was measured and tested with here.
  if (!/^127\.\d+\.\d+\.\d+:\d{1,5}$/.test(c.relay)) {
    throw new HaproxyConfigError(`continuation relay ${JSON.stringify(c.relay)} of ${name} must be an IPv4 loopback address:port with one worker: HAProxy reaches it as its SOCKS4 hop to the servers, which takes a TCP address (Unix sockets serve several workers)`);
  }
  return c.relay;
}

/**
 * The public frontend's rule: completions through the relay while it is up (otherwise straight to
 * the servers, as without it). Through the relay as the SOCKS4 hop, also while the relayed backend
 * has a server up: a relay that was down made every connection through it fail, which took its
 * servers out of that backend (`observe layer4`) until their checks bring them back.
 */
export function renderContinuationRoute(name: string, viaHop: boolean): string[] {
  const route = `METH_POST { path /v1/chat/completions /v1/completions } { nbsrv(${name}_continuation) gt 0 }`;
  if (viaHop) return [`  use_backend ${name}_relayed if ${route} { nbsrv(${name}_relayed) gt 0 }`];
  return [`  use_backend ${name}_continuation if ${route}`];
}

/**
 * The relay's backend and the loopback listener it sends to. With the relay as the SOCKS4 hop
 * the backend carries no request: its check is what the public frontend's rule reads (the relay
 * up), and the listener takes only the second request of a cut answer.
 */
export function renderContinuation(name: string, c: HaproxyContinuation, t: { timeoutClientMs: number; timeoutServerMs: number }, maxconn: number): string[] {
  if (!ADDR_RE.test(c.relay) && !UNIX_RE.test(c.relay)) throw new HaproxyConfigError(`continuation relay ${JSON.stringify(c.relay)} of ${name} must be address:port or unix@/path`);
  const workers = c.workers ?? 1;
  if (!Number.isInteger(workers) || workers < 1 || workers > MAX_CONTINUE_WORKERS) throw new HaproxyConfigError(`continuation workers ${workers} of ${name} must be an integer from 1 to ${MAX_CONTINUE_WORKERS}`);
  if (!LOOPBACK_RE.test(c.bind) && !UNIX_RE.test(c.bind)) throw new HaproxyConfigError(`continuation bind ${JSON.stringify(c.bind)} of ${name} must be a loopback address:port or unix@/path`);
  return [
    "",
    `frontend ${name}_continuation`,
    // A Unix socket is opened by the relay, which runs as another user: readable and writable by
    // all, inside a volume only the pod's own containers mount.
    `  bind ${c.bind}${c.bind.startsWith("unix@") ? " mode 666" : ""}`,
    `  maxconn ${maxconn}`,
    `  timeout client ${ms(t.timeoutClientMs)}`,
    // Longer than the relay keeps its idle connections here (CONTINUE_IDLE): it closes them, never this side.
    `  timeout http-keep-alive ${ms(CONTINUE_IDLE.listenerMs)}`,
    // http-response rules see only a server's answers; an answer HAProxy made itself (a server
    // that died before answering: 502) is marked for the relay, which may then ask once more.
    "  http-response set-var(txn.llmha_srv) int(1)",
    `  http-after-response set-header ${PROXY_ANSWER_HEADER} 1 unless { var(txn.llmha_srv) -m found }`,
    `  default_backend ${name}_servers`,
    "",
    `backend ${name}_continuation`,
    "  mode http",
    "  timeout connect 1s",
    // The servers' own bound (an idle timeout: a stream sends all along); the pod's stop budget
    // (hard-stop-after) is built on it.
    `  timeout server ${ms(t.timeoutServerMs)}`,
    "  retries 1",
    "  retry-on conn-failure",
    // Any idle connection to the relay takes the next request, a new client's first one included
    // (`safe`, the default, opens a new connection for it): the relay is one local process with no
    // state per connection, and it never closes an idle one itself (keepAliveTimeout 0), so none
    // is closed under a request. Measured: with `safe` every new client connection cost one
    // accept in the relay (lab/bench/continuation.ts, docs/bench.md).
    "  http-reuse always",
    ...(workers > 1 ? ["  balance leastconn"] : []),
    ...Array.from({ length: workers }, (_, i) => `  server ${workers > 1 ? `relay-${i}` : "relay"} ${relayWorkerAddress(c.relay, i, workers)} check inter 1s fall 2 rise 1`),
  ];
}
