/**
 * Settings of `llm-ha fallback` and `llm-ha cache`: environment variables, each also a
 * `--flag`. Bad values stop start-up with a message naming the variable (exit code 2).
 */
import { readFileSync } from "node:fs";
import type { KafkaAuth } from "./queue";
import { didYouMean } from "../../../../contracts/did-you-mean";

export class FallbackConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FallbackConfigError";
  }
}

export interface FallbackConfig {
  cluster: string;
  host: string;
  port: number;
  /** The metrics listener (`GET /metrics`, `/healthz` only); null when turned off. */
  metricsAddr: { host: string; port: number } | null;
  redisUrl: string | null;
  models: string[];
  maxBodyBytes: number;
  providersFile: string | null;
  upstreamWhen: "l4" | "always" | "never";
  kafkaBrokers: string[];
  kafkaAuth: KafkaAuth;
  kafkaTls: boolean;
  kafkaRegion: string | null;
  kafkaTopic: string | null;
  queueRoutes: string[];
  maxQueueDepth: number;
  tenantTokensPerMin: number;
  replay: boolean;
  l1Url: string;
  replayRps: number;
  replayAttempts: number;
  replayTimeoutMs: number;
  replayDeadlineMs: number;
  replayConcurrency: number;
  replaySessionTimeoutMs: number;
  promptRetentionS: number;
  cacheReplayedTenants: string[];
  resultTtlS: number;
  cacheMaxEntries: number;
  cacheMaxBytes: number;
  cacheTtlS: number;
  retryAfterS: number;
  wakeEtaS: number;
  logLevel: string;
}

type Kind = "string" | "int" | "list" | "bool" | "url" | "enum" | "addr";

interface Setting {
  key: keyof FallbackConfig;
  env: string;
  kind: Kind;
  def: string;
  help: string;
  min?: number;
  values?: readonly string[];
}

export const FALLBACK_SETTINGS: readonly Setting[] = [
  { key: "cluster", env: "LLMHA_CLUSTER", kind: "string", def: "default", help: "cluster name; Redis key namespace and Kafka topic" },
  // Loopback: the API has no client authentication of its own; HAProxy in the same pod is its only client.
  { key: "host", env: "LLMHA_FALLBACK_HOST", kind: "string", def: "127.0.0.1", help: "address to listen on (the OpenAI API: reachable by the proxy beside it only, unless widened on purpose)" },
  { key: "port", env: "LLMHA_FALLBACK_PORT", kind: "int", def: "9410", help: "HTTP port (OpenAI API, /metrics)", min: 0 },
  { key: "metricsAddr", env: "LLMHA_FALLBACK_METRICS_ADDR", kind: "addr", def: "0.0.0.0:9411", help: "metrics listener host:port (GET /metrics and /healthz only, for Prometheus); off = none" },
  { key: "redisUrl", env: "LLMHA_REDIS_URL", kind: "string", def: "", help: "Redis: cache, results, tier; without it no cache and no results" },
  { key: "models", env: "LLMHA_FALLBACK_MODELS", kind: "list", def: "", help: "model ids served (default: the providers' models); others get 404" },
  { key: "maxBodyBytes", env: "LLMHA_FALLBACK_MAX_BODY_BYTES", kind: "int", def: "1048576", help: "largest request body (413 above)", min: 1024 },
  { key: "providersFile", env: "LLMHA_FALLBACK_PROVIDERS_FILE", kind: "string", def: "", help: "JSON array of upstream providers (name, url, priority, timeoutMs, models, keyFile|keyEnv)" },
  { key: "upstreamWhen", env: "LLMHA_FALLBACK_UPSTREAM_WHEN", kind: "enum", def: "l4", values: ["l4", "always", "never"], help: "when providers are used: l4 = only while the tier is L4 (or unknown)" },
  { key: "kafkaBrokers", env: "LLMHA_KAFKA_BROKERS", kind: "list", def: "", help: "Kafka bootstrap brokers host:port,…; without it no queue" },
  { key: "kafkaAuth", env: "LLMHA_KAFKA_AUTH", kind: "enum", def: "none", values: ["none", "msk-iam"], help: "Kafka auth: none or msk-iam (SASL OAUTHBEARER, TLS)" },
  { key: "kafkaTls", env: "LLMHA_KAFKA_TLS", kind: "bool", def: "false", help: "TLS to the brokers (always on with msk-iam)" },
  { key: "kafkaRegion", env: "LLMHA_KAFKA_REGION", kind: "string", def: "", help: "AWS region for msk-iam (default AWS_REGION)" },
  { key: "kafkaTopic", env: "LLMHA_KAFKA_TOPIC", kind: "string", def: "", help: "topic (default llmha.<cluster>.requests)" },
  { key: "queueRoutes", env: "LLMHA_FALLBACK_QUEUE_ROUTES", kind: "list", def: "", help: "paths queued without the x-llmha-queue header, e.g. /v1/completions" },
  { key: "maxQueueDepth", env: "LLMHA_FALLBACK_MAX_QUEUE_DEPTH", kind: "int", def: "100000", help: "queue depth at which opted-in requests get 503 + Retry-After", min: 1 },
  { key: "tenantTokensPerMin", env: "LLMHA_FALLBACK_TENANT_TOKENS_PER_MIN", kind: "int", def: "200000", help: "tokens (max_tokens × n of each request) a tenant may send the paid providers per minute, per fallback; past it 429 + Retry-After", min: 1 },
  { key: "replay", env: "LLMHA_FALLBACK_REPLAY", kind: "bool", def: "true", help: "run the replay consumer" },
  { key: "l1Url", env: "LLMHA_FALLBACK_L1_URL", kind: "url", def: "http://127.0.0.1:8080", help: "the L1 proxy replayed requests go through" },
  { key: "replayRps", env: "LLMHA_FALLBACK_REPLAY_RPS", kind: "int", def: "5", help: "replayed requests per second at most", min: 1 },
  { key: "replayAttempts", env: "LLMHA_FALLBACK_REPLAY_ATTEMPTS", kind: "int", def: "5", help: "tries against a fleet still down before a request is stored as failed", min: 1 },
  { key: "replayTimeoutMs", env: "LLMHA_FALLBACK_REPLAY_TIMEOUT_MS", kind: "int", def: "120000", help: "per attempt of a replayed request", min: 100 },
  { key: "replayDeadlineMs", env: "LLMHA_FALLBACK_REPLAY_DEADLINE_MS", kind: "int", def: "600000", help: "per replayed request, all attempts together; past it the request is stored failed", min: 100 },
  { key: "replayConcurrency", env: "LLMHA_FALLBACK_REPLAY_CONCURRENCY", kind: "int", def: "4", help: "requests replayed at once by one fallback (one per topic partition at most)", min: 1 },
  { key: "replaySessionTimeoutMs", env: "LLMHA_FALLBACK_REPLAY_SESSION_TIMEOUT_MS", kind: "int", def: "2500", help: "replay group session: how long a crashed fallback holds the queue's partitions (the brokers' group.min.session.timeout.ms must allow it)", min: 1000 },
  { key: "promptRetentionS", env: "LLMHA_FALLBACK_PROMPT_RETENTION_S", kind: "int", def: "86400", help: "retention.ms of the queue topic (queued prompts are user data), set when the fallback creates the topic", min: 60 },
  { key: "cacheReplayedTenants", env: "LLMHA_FALLBACK_CACHE_REPLAYED_TENANTS", kind: "list", def: "", help: "tenants whose replayed results are cached, for themselves only (default none)" },
  { key: "resultTtlS", env: "LLMHA_FALLBACK_RESULT_TTL_S", kind: "int", def: "86400", help: "how long results of queued requests (and idempotency keys) are kept", min: 1 },
  { key: "cacheMaxEntries", env: "LLMHA_FALLBACK_CACHE_MAX_ENTRIES", kind: "int", def: "10000", help: "cache bound: entries (LRU)", min: 1 },
  { key: "cacheMaxBytes", env: "LLMHA_FALLBACK_CACHE_MAX_BYTES", kind: "int", def: "67108864", help: "cache bound: bytes (LRU)", min: 1024 },
  { key: "cacheTtlS", env: "LLMHA_FALLBACK_CACHE_TTL_S", kind: "int", def: "604800", help: "TTL of an entry that names none", min: 1 },
  { key: "retryAfterS", env: "LLMHA_FALLBACK_RETRY_AFTER_S", kind: "int", def: "30", help: "Retry-After of a 503 when no standby wake-up is under way", min: 1 },
  { key: "wakeEtaS", env: "LLMHA_FALLBACK_WAKE_ETA_S", kind: "int", def: "600", help: "expected standby wake-up time (Retry-After while one is under way)", min: 1 },
  { key: "logLevel", env: "LLMHA_LOG_LEVEL", kind: "enum", def: "info", values: ["fatal", "error", "warn", "info", "debug", "trace", "silent"], help: "log level" },
];

function flagOf(env: string): string {
  return "--" + env.replace(/^LLMHA_(FALLBACK_)?/, "").toLowerCase().replace(/_/g, "-");
}

export function fallbackHelp(): string {
  const rows = FALLBACK_SETTINGS.map((s) => `  ${(flagOf(s.env) + " / " + s.env).padEnd(64)} ${s.help}${s.def ? ` (default ${s.def})` : ""}`);
  return `llm-ha fallback — the L4 service beside each L1 proxy: verified-answer cache, provider failover, Kafka queue and replay

Usage: llm-ha fallback [flags]

${rows.join("\n")}
`;
}

/** Parses flags (`--x v` or `--x=v`) over the environment. */
export function loadFallbackConfig(argv: string[], env: NodeJS.ProcessEnv): FallbackConfig {
  const values = new Map<string, string>();
  for (const s of FALLBACK_SETTINGS) if (env[s.env] !== undefined) values.set(s.env, env[s.env] as string);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const s = FALLBACK_SETTINGS.find((x) => flagOf(x.env) === flag);
    if (!s) throw new FallbackConfigError(`unknown flag ${a}${didYouMean(flag, FALLBACK_SETTINGS.map((x) => flagOf(x.env)))} (see llm-ha fallback --help)`);
    const v = inline ?? argv[++i];
    if (v === undefined) throw new FallbackConfigError(`${flag} needs a value`);
    values.set(s.env, v);
  }
  const out: Record<string, unknown> = {};
  for (const s of FALLBACK_SETTINGS) {
    const raw = (values.get(s.env) ?? s.def).trim();
    switch (s.kind) {
      case "string":
        out[s.key] = raw === "" ? (s.def === "" ? null : s.def) : raw;
        break;
      case "int": {
        const n = Number(raw);
        if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < (s.min ?? 0)) throw new FallbackConfigError(`${s.env}=${JSON.stringify(raw)} must be an integer ≥ ${s.min ?? 0}`);
        out[s.key] = n;
        break;
      }
      case "list":
        out[s.key] = raw.split(",").map((x) => x.trim()).filter(Boolean);
        break;
      case "bool":
        if (!/^(true|false|1|0)$/.test(raw)) throw new FallbackConfigError(`${s.env}=${JSON.stringify(raw)} must be true or false`);
        out[s.key] = raw === "true" || raw === "1";
        break;
      case "url":
        try {
          new URL(raw);
        } catch {
          throw new FallbackConfigError(`${s.env}=${JSON.stringify(raw)} is not a URL`);
        }
        out[s.key] = raw;
        break;
      case "addr":
        out[s.key] = parseListenAddr(s.env, raw);
        break;
      case "enum":
        if (!s.values?.includes(raw)) throw new FallbackConfigError(`${s.env}=${JSON.stringify(raw)} must be one of ${s.values?.join(", ")}`);
        out[s.key] = raw;
        break;
    }
  }
  const cfg = out as unknown as FallbackConfig;
  if (!/^[A-Za-z0-9_.-]+$/.test(cfg.cluster)) throw new FallbackConfigError(`LLMHA_CLUSTER=${JSON.stringify(cfg.cluster)} must match [A-Za-z0-9_.-]+`);
  cfg.kafkaRegion ??= env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? null;
  if (cfg.kafkaAuth === "msk-iam" && !cfg.kafkaRegion) throw new FallbackConfigError("LLMHA_KAFKA_AUTH=msk-iam needs LLMHA_KAFKA_REGION (or AWS_REGION)");
  if (cfg.metricsAddr && cfg.metricsAddr.port !== 0 && cfg.metricsAddr.port === cfg.port && sameListener(cfg.metricsAddr.host, cfg.host)) {
    throw new FallbackConfigError(`LLMHA_FALLBACK_METRICS_ADDR=${JSON.stringify(`${cfg.metricsAddr.host}:${cfg.metricsAddr.port}`)} takes the API's port (LLMHA_FALLBACK_PORT=${cfg.port}): give the metrics listener a port of its own`);
  }
  for (const b of cfg.kafkaBrokers) if (!/^[A-Za-z0-9_.-]+:\d+$/.test(b)) throw new FallbackConfigError(`LLMHA_KAFKA_BROKERS: ${JSON.stringify(b)} is not host:port`);
  return cfg;
}

/**
 * `host:port` (IPv6 as `[::1]:9411`), or `off`/`none`/empty for no listener. The port may be
 * 0 (any free port: tests, the drill).
 */
export function parseListenAddr(env: string, raw: string): { host: string; port: number } | null {
  if (raw === "" || raw === "off" || raw === "none") return null;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_.-]+)):(\d{1,5})$/.exec(raw);
  const bad = (why: string): FallbackConfigError => new FallbackConfigError(`${env}=${JSON.stringify(raw)} ${why}`);
  if (!m) throw bad("must be host:port (e.g. 0.0.0.0:9411, [::]:9411) or off");
  const port = Number(m[3]);
  if (port > 65535) throw bad("has a port over 65535");
  return { host: m[1] ?? m[2], port };
}

const WILDCARD = new Set(["0.0.0.0", "::", ""]);
/** Two listeners on the same port collide when the hosts are the same or either is a wildcard. */
function sameListener(a: string, b: string): boolean {
  return a === b || WILDCARD.has(a) || WILDCARD.has(b);
}

/** The providers file's text, or null when none is configured. */
export function readProvidersFile(cfg: FallbackConfig): string | null {
  if (!cfg.providersFile) return null;
  try {
    return readFileSync(cfg.providersFile, "utf8");
  } catch (err) {
    throw new FallbackConfigError(`LLMHA_FALLBACK_PROVIDERS_FILE: cannot read ${cfg.providersFile} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
}
