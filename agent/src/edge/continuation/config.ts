/**
 * Settings of `llm-ha continue`: environment variables, each also a `--flag`. Bad values stop
 * start-up with a message naming the variable (exit code 2).
 */
import { CONTINUATION_KINDS, MAX_CONTINUE_WORKERS, type ContinuationKind } from "../../../../contracts/continuation";
import { isIP } from "node:net";
import { didYouMean } from "../../../../contracts/did-you-mean";
import { parseListenAddr } from "../fallback/config";

export class ContinueConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ContinueConfigError";
  }
}

/** Where the relay listens or sends: a TCP address, or a Unix socket shared with HAProxy in the pod. */
export type RelayAddress = { host: string; port: number } | { path: string };

export interface ContinueConfig {
  host: string;
  port: number;
  /** A Unix socket to listen on instead of host:port (`LLMHA_CONTINUE_SOCKET`), or null. */
  socket: string | null;
  upstream: RelayAddress;
  kind: ContinuationKind;
  stallMs: number;
  /** Pause before the second request after a server vanished (not after a stall). */
  resendDelayMs: number;
  maxBodyBytes: number;
  /**
   * The relay's connections to the proxy's continuation listener: at most `maxSockets` at once (a
   * stream holds one for its whole length, so a request past it waits for a stream to end), and up
   * to `maxFreeSockets` of them kept idle for the next request.
   */
  upstreamPool: { maxSockets: number; maxFreeSockets: number };
  metricsAddr: { host: string; port: number } | null;
  /**
   * Relay processes (`LLMHA_CONTINUE_WORKERS`): one Node process relays on one core at most, so a
   * pod that carries more streams than one core relays runs more of them. Above 1, a primary
   * process forks them, each on a listener of its own (`relayWorkerSocket`/`relayWorkerPort`:
   * HAProxy balances over them), serves their metrics summed, and replaces one that dies.
   */
  workers: number;
  /**
   * The local address the relay's connections to the servers leave from (`LLMHA_CONTINUE_SOURCE`),
   * as HAProxy's `source` would set its own; null: the kernel's choice (the pod's address).
   */
  source: string | null;
  logLevel: string;
}

export { MAX_CONTINUE_WORKERS };

/** The continuation listener's maxconn in an L1 pod of the default globals (2048 connections): (2048 − 64) / 2. */
export const DEFAULT_UPSTREAM_MAX_SOCKETS = 992;

interface Setting {
  env: string;
  def: string;
  help: string;
}

export const CONTINUE_SETTINGS: readonly Setting[] = [
  // Loopback: HAProxy in the same pod is its only client; the edge authenticated the request.
  { env: "LLMHA_CONTINUE_HOST", def: "127.0.0.1", help: "address to listen on (the proxy beside it only)" },
  { env: "LLMHA_CONTINUE_PORT", def: "9420", help: "port HAProxy sends completions to" },
  { env: "LLMHA_CONTINUE_SOCKET", def: "", help: "a Unix socket path to listen on instead of host:port (HAProxy beside it in the pod, through a shared emptyDir: cheaper per chunk than loopback TCP)" },
  { env: "LLMHA_CONTINUE_UPSTREAM", def: "127.0.0.1:9422", help: "the proxy's loopback continuation listener: host:port, or unix@/path of its Unix socket (same servers backend)" },
  { env: "LLMHA_CONTINUE_KIND", def: "vllm", help: `inference server kind, how a chat answer is carried on: ${CONTINUATION_KINDS.join(", ")}` },
  { env: "LLMHA_CONTINUE_STALL_MS", def: "30000", help: "no chunk this long after an answer began: its server is taken for dead" },
  { env: "LLMHA_CONTINUE_RESEND_DELAY_MS", def: "250", help: "pause before asking again after a server vanished under an answer (reset, cut), so the proxy has taken it out first" },
  // Sized to the pod: the continuation listener's maxconn (infra sets it; the listener refuses more anyway).
  { env: "LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS", def: String(DEFAULT_UPSTREAM_MAX_SOCKETS), help: "most connections to the proxy's continuation listener at once (a stream holds one throughout): its maxconn" },
  { env: "LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS", def: "", help: "idle connections to the listener kept for the next request (each closed after 20 s idle) (default: the max sockets)" },
  { env: "LLMHA_CONTINUE_MAX_BODY_BYTES", def: "8388608", help: "largest request body (the edge's limit)" },
  { env: "LLMHA_CONTINUE_METRICS_ADDR", def: "0.0.0.0:9421", help: "metrics listener host:port (GET /metrics, /healthz); off = none" },
  { env: "LLMHA_CONTINUE_WORKERS", def: "1", help: `relay processes, one core each at most (1–${MAX_CONTINUE_WORKERS}; the L1 pod: llm-ha:haproxy.relayWorkers): above 1 a primary forks them, worker i on the socket named with -i before its extension (relay-0.sock, …) or on port + i, sums their metrics and replaces one that dies` },
  { env: "LLMHA_CONTINUE_SOURCE", def: "", help: "local IP address the relay's connections to the servers (as HAProxy's SOCKS4 hop) leave from (default: the kernel's choice, the pod's address)" },
  { env: "LLMHA_LOG_LEVEL", def: "info", help: "log level" },
];

function flagOf(env: string): string {
  return "--" + env.replace(/^LLMHA_(CONTINUE_)?/, "").toLowerCase().replace(/_/g, "-");
}

export function continueHelp(): string {
  const rows = CONTINUE_SETTINGS.map((s) => `  ${(flagOf(s.env) + " / " + s.env).padEnd(52)} ${s.help}${s.def === "" ? "" : ` (default ${s.def})`}`);
  return `llm-ha continue — carries a completion on when its server dies mid-answer (the L1 pod)\n\nUsage: llm-ha continue [flags]\n\n${rows.join("\n")}\n`;
}

function int(env: string, raw: string, min: number): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min) throw new ContinueConfigError(`${env}=${JSON.stringify(raw)} must be an integer ≥ ${min}`);
  return n;
}

function workers(raw: string): number {
  const n = int("LLMHA_CONTINUE_WORKERS", raw, 1);
  if (n > MAX_CONTINUE_WORKERS) throw new ContinueConfigError(`LLMHA_CONTINUE_WORKERS=${n} must be at most ${MAX_CONTINUE_WORKERS} (one relay process per core of the pod)`);
  return n;
}

/**
 * One worker's share of the pool toward the listener when `workers` processes share it: the
 * listener's maxconn bounds them together, so each may open and keep idle its part of it (an
 * idle connection held by one worker would otherwise keep another from opening one).
 */
export function workerPool(pool: ContinueConfig["upstreamPool"], workers: number): ContinueConfig["upstreamPool"] {
  return { maxSockets: Math.max(1, Math.ceil(pool.maxSockets / workers)), maxFreeSockets: Math.ceil(pool.maxFreeSockets / workers) };
}

/** A Unix socket's path: absolute, and short enough for the kernel's 108-byte address. */
function socketPath(env: string, raw: string): string {
  if (!raw.startsWith("/") || Buffer.byteLength(raw) > 100 || /\s/.test(raw)) throw new ContinueConfigError(`${env}: ${JSON.stringify(raw)} must be an absolute Unix socket path of at most 100 bytes, without spaces`);
  return raw;
}

function sourceAddress(raw: string): string | null {
  if (raw === "") return null;
  if (isIP(raw) === 0) throw new ContinueConfigError(`LLMHA_CONTINUE_SOURCE=${JSON.stringify(raw)} must be an IP address of this host (or empty: the kernel's choice)`);
  return raw;
}

/** Parses flags (`--x v` or `--x=v`) over the environment. */
export function loadContinueConfig(argv: string[], env: NodeJS.ProcessEnv): ContinueConfig {
  const v = new Map<string, string>();
  for (const s of CONTINUE_SETTINGS) v.set(s.env, (env[s.env] ?? s.def).trim());
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const s = CONTINUE_SETTINGS.find((x) => flagOf(x.env) === flag);
    if (!s) throw new ContinueConfigError(`unknown flag ${a}${didYouMean(flag, CONTINUE_SETTINGS.map((x) => flagOf(x.env)))} (see llm-ha continue --help)`);
    const val = inline ?? argv[++i];
    if (val === undefined) throw new ContinueConfigError(`${flag} needs a value`);
    v.set(s.env, val.trim());
  }
  const get = (k: string): string => v.get(k) ?? "";
  const rawUp = get("LLMHA_CONTINUE_UPSTREAM");
  let upstream: RelayAddress | null = null;
  if (rawUp.startsWith("unix@")) upstream = { path: socketPath("LLMHA_CONTINUE_UPSTREAM", rawUp.slice(5)) };
  else {
    try {
      upstream = parseListenAddr("LLMHA_CONTINUE_UPSTREAM", rawUp);
    } catch {
      // The message below says what this variable takes (a listen address's says "or off").
    }
  }
  if (!upstream || ("port" in upstream && upstream.port === 0)) throw new ContinueConfigError(`LLMHA_CONTINUE_UPSTREAM=${JSON.stringify(rawUp)} must be host:port or unix@/path of the proxy's continuation listener`);
  const rawSocket = get("LLMHA_CONTINUE_SOCKET");
  const kind = get("LLMHA_CONTINUE_KIND");
  if (!(CONTINUATION_KINDS as readonly string[]).includes(kind)) throw new ContinueConfigError(`LLMHA_CONTINUE_KIND=${JSON.stringify(kind)} must be one of ${CONTINUATION_KINDS.join(", ")}`);
  const maxSockets = int("LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS", get("LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS"), 1);
  const freeRaw = get("LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS");
  const maxFreeSockets = freeRaw === "" ? maxSockets : int("LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS", freeRaw, 0);
  if (maxFreeSockets > maxSockets) {
    throw new ContinueConfigError(`LLMHA_CONTINUE_UPSTREAM_MAX_FREE_SOCKETS=${maxFreeSockets} must be ≤ LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS=${maxSockets}: no more can be idle than can be open`);
  }
  return {
    host: get("LLMHA_CONTINUE_HOST"),
    port: int("LLMHA_CONTINUE_PORT", get("LLMHA_CONTINUE_PORT"), 0),
    socket: rawSocket === "" ? null : socketPath("LLMHA_CONTINUE_SOCKET", rawSocket),
    upstream,
    kind: kind as ContinuationKind,
    stallMs: int("LLMHA_CONTINUE_STALL_MS", get("LLMHA_CONTINUE_STALL_MS"), 100),
    resendDelayMs: int("LLMHA_CONTINUE_RESEND_DELAY_MS", get("LLMHA_CONTINUE_RESEND_DELAY_MS"), 0),
    maxBodyBytes: int("LLMHA_CONTINUE_MAX_BODY_BYTES", get("LLMHA_CONTINUE_MAX_BODY_BYTES"), 1024),
    upstreamPool: { maxSockets, maxFreeSockets },
    metricsAddr: parseListenAddr("LLMHA_CONTINUE_METRICS_ADDR", get("LLMHA_CONTINUE_METRICS_ADDR")),
    workers: workers(get("LLMHA_CONTINUE_WORKERS")),
    source: sourceAddress(get("LLMHA_CONTINUE_SOURCE")),
    logLevel: get("LLMHA_LOG_LEVEL"),
  };
}
