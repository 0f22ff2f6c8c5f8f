/**
 * The settings of the HAProxy configuration generator (`haproxy-config.ts`) and their
 * defaults. The defaults ARE the production configuration: the infrastructure renders the
 * L1 proxies with them and the drill measures them, so a drill scenario that relies on a
 * default (retries, the L2 spread, the overload answer) measures what production runs.
 */

export interface HaproxyTuning {
  /** Plain `check` interval (catches a dead node). Default 500 ms. */
  checkInterMs: number;
  /** Consecutive failed checks to mark DOWN. Default 2. */
  fall: number;
  /** Consecutive passed checks to mark UP again. Default 2. */
  rise: number;
  /**
   * `fall` of the backup rows (the other AZs' nodes, across the inter-AZ network). A lossy
   * cross-AZ link must not take a healthy backup out while it carries a spill: with one
   * connection in five refused, two failed checks in a row happen 4 % of the time per pair
   * (every second, at a 500 ms interval), four 0.16 %. A backup that really died is out after
   * 4 × `checkInterMs` (2 s), and its own AZ's proxy takes it out at once. Default 4.
   */
  backupFall: number;
  /** How often HAProxy asks the agent. Default 500 ms. */
  agentInterMs: number;
  /** HAProxy's own ramp after a server comes back UP; 0 turns it off. Default 5000 ms. */
  slowstartMs: number;
  /**
   * Retries of a request, each on another server (`option redispatch 1`). Default 1: a
   * request that kills the server it reaches (a query of death) must not be replayed to
   * the next servers and take them down too; one retry still covers a server that was
   * known dead (refused the connection) or refused the request (404/503). The `httpchk-*`
   * baselines default to 3 (`BASELINE_HAPROXY_TUNING`).
   */
  retries: number;
  /** Default 1000 ms. */
  timeoutConnectMs: number;
  /**
   * Longest wait for the server's next bytes: the whole generation of a non-streaming
   * completion (HAProxy answers 504 past it). Default 600000 ms, the longest generation
   * llm-ha allows: max_tokens 8192 at ~15 tokens/s (a loaded node, batch full) is ~550 s.
   */
  timeoutServerMs: number;
  /**
   * Longest wait on the client (a request body arriving, a streamed answer it does not
   * read). Sized like `timeoutServerMs` so that the proxy never cuts an answer a server is
   * still allowed to give. Idle keep-alive connections are bounded separately (10 s).
   * Default 600000 ms.
   */
  timeoutClientMs: number;
  /**
   * Requests one HAProxy sends a server at once (`maxconn` on each server line); more wait
   * in the backend queue. Sized to what one GPU node batches (vLLM `max_num_seqs`-like).
   * Per HAProxy process: with R L1 replicas a node may get up to R × this. During a
   * server's `slowstart` HAProxy ramps this limit up with its weight. Default 32.
   */
  serverMaxconn: number;
  /**
   * How long a request waits in the backend queue for a server slot before HAProxy answers
   * 503 (with `Retry-After`). Short: overload becomes a fast, retryable refusal instead of
   * a client timeout. Default 1000 ms.
   */
  timeoutQueueMs: number;
  /** `Retry-After` (seconds) added to every 503 the proxy returns that has none. Default 1. */
  retryAfterS: number;
  /**
   * Connections the proxy's frontend accepts at once. Below the global `maxconn`, so the
   * monitor (`/healthz`, `/metrics`) and the `/az/health` listener still accept when the
   * inference frontend is full. Default: the global `maxconn` less `healthConns`.
   */
  frontendMaxconn?: number;
}

export const DEFAULT_HAPROXY_TUNING: Readonly<HaproxyTuning> = Object.freeze({
  checkInterMs: 500,
  fall: 2,
  rise: 2,
  backupFall: 4,
  agentInterMs: 500,
  slowstartMs: 5000,
  retries: 1,
  timeoutConnectMs: 1000,
  timeoutServerMs: 600_000,
  timeoutClientMs: 600_000,
  serverMaxconn: 32,
  timeoutQueueMs: 1000,
  retryAfterS: 1,
});

/**
 * What the `httpchk-*` baselines take instead of `DEFAULT_HAPROXY_TUNING`: HAProxy's own
 * `retries 3`. They stand for a plain HAProxy, which retries connection failures only
 * (never a request a server took), so the one-retry limit against a query of death does
 * not concern them; with 1 retry the drill's crash scenario gave them ~10 × 503 per crash
 * that 3 retries never gave, which would flatter llm-ha in the comparison.
 */
export const BASELINE_HAPROXY_TUNING: Readonly<Partial<HaproxyTuning>> = Object.freeze({ retries: 3 });

/** Process-wide settings (the `global` section), with their defaults. */
export interface HaproxyGlobals {
  /**
   * Concurrent client connections of the whole process. Sized with `bufsize`: a request in
   * flight holds about two buffers (request and response channel), so the buffers take at
   * most maxconn × 2 × bufsize (2048 × 2 × 128 KiB = 512 MiB). Default 2048.
   */
  maxconn: number;
  /**
   * `tune.bufsize` (bytes). HAProxy retries only a request that fits in one buffer; the
   * default 16 KiB left prompts over ~15 KB without retries. 131072 retries bodies up to
   * ~129.7 KB (measured on 2.6: bufsize − 1024 of `tune.maxrewrite` − the headers).
   * Default 131072.
   */
  bufsize: number;
  /**
   * Connections kept out of the inference frontends' reach for the monitor (`/healthz`,
   * `/stats`, `/metrics`) and `/az/health` listeners: each of these accepts at most half.
   * At most half the global `maxconn` is kept. Default 64.
   */
  healthConns: number;
}

export const DEFAULT_HAPROXY_GLOBALS: Readonly<HaproxyGlobals> = Object.freeze({
  maxconn: 2048,
  bufsize: 131_072,
  healthConns: 64,
});

/** Buffers a request in flight holds: its request and its response channel. */
export const BUFFERS_PER_STREAM = 2;

/** Worst-case buffer memory (bytes) of `streams` requests in flight. */
export function haproxyBufferBytes(streams: number, bufsize: number = DEFAULT_HAPROXY_GLOBALS.bufsize): number {
  return streams * BUFFERS_PER_STREAM * bufsize;
}

/** Connections the health listeners keep: `healthConns`, but never more than half the global `maxconn`. */
export function healthReserve(g: Pick<HaproxyGlobals, "maxconn" | "healthConns">): number {
  return Math.min(g.healthConns, Math.floor(g.maxconn / 2));
}

/** The frontend `maxconn` a proxy gets: its own setting, else the global one less the health reserve. */
export function frontendMaxconn(t: Pick<HaproxyTuning, "frontendMaxconn">, g: Pick<HaproxyGlobals, "maxconn" | "healthConns">): number {
  return t.frontendMaxconn ?? g.maxconn - healthReserve(g);
}

/**
 * Margin of `hard-stop-after` over the longest timeout: a request that started just before
 * the soft stop (SIGUSR1) still gets its whole `timeout server`.
 */
export const HARD_STOP_MARGIN_MS = 10_000;

/**
 * `hard-stop-after` for proxies with these tunings: after a soft stop HAProxy waits this
 * long for the requests in flight, then exits. The longest server/client timeout plus
 * `HARD_STOP_MARGIN_MS`. A pod's termination grace period must exceed its preStop plus this.
 */
export function hardStopAfterMs(tunings: readonly Partial<HaproxyTuning>[]): number {
  const longest = Math.max(
    ...tunings.map((p) => {
      const t = { ...DEFAULT_HAPROXY_TUNING, ...p };
      return Math.max(t.timeoutServerMs, t.timeoutClientMs);
    }),
    DEFAULT_HAPROXY_TUNING.timeoutConnectMs,
  );
  return longest + HARD_STOP_MARGIN_MS;
}

/** Thrown when the generator is asked for a configuration HAProxy would refuse. */
export class HaproxyConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HaproxyConfigError";
  }
}

/** A duration in HAProxy's syntax: whole milliseconds. */
export function ms(v: number): string {
  return `${Math.round(v)}ms`;
}
