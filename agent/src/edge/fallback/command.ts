/** `llm-ha fallback` (the L4 service) and `llm-ha cache import|list|rm` (the verified answers). */
import { readFileSync } from "node:fs";
import { createRedisClient, type RedisClient } from "../../fleet/redis/client";
import { createLogger, type Logger } from "../../util/log";
import { TenantTokenBudget } from "./budget";
import { CacheImportError, VerifiedCache } from "./cache";
import { FallbackConfigError, fallbackHelp, loadFallbackConfig, readProvidersFile, type FallbackConfig } from "./config";
import { FallbackMetrics } from "./metrics";
import { FallbackMetricsServer } from "./metrics-server";
import { loadProviders, ProviderConfigError, type Provider } from "./providers";
import { groupFor, kafkaClient, RequestQueue, topicFor } from "./queue";
import { Replayer } from "./replay";
import { ResultStore } from "./results";
import { FallbackService } from "./server";
import { TierReader } from "./tier";
import { didYouMean } from "../../../../contracts/did-you-mean";
import { serveCommand } from "../serve";

export interface RunningFallback {
  port: number;
  /** Port of the metrics listener; null when `LLMHA_FALLBACK_METRICS_ADDR=off`. */
  metricsPort: number | null;
  service: FallbackService;
  metrics: FallbackMetrics;
  close(): Promise<void>;
}

/** Starts the service (and the replay consumer) from a configuration. */
export async function runFallback(cfg: FallbackConfig, opts: { log?: Logger; env?: NodeJS.ProcessEnv } = {}): Promise<RunningFallback> {
  const log = opts.log ?? createLogger({ level: cfg.logLevel, name: "llm-ha-fallback" });
  const providersText = readProvidersFile(cfg);
  const providers: Provider[] = providersText ? loadProviders(providersText, opts.env ?? process.env) : [];
  const models = cfg.models.length ? cfg.models : [...new Set(providers.flatMap((p) => Object.keys(p.models).filter((m) => m !== "*")))];
  if (models.length === 0) throw new FallbackConfigError("no models: set LLMHA_FALLBACK_MODELS or give providers with models");
  const metrics = new FallbackMetrics();
  let redis: RedisClient | null = null;
  if (cfg.redisUrl) {
    redis = createRedisClient(cfg.redisUrl, { name: "llmha-fallback", log, commandTimeoutMs: 500 });
    await redis.whenReady(2000);
  }
  const cache = redis ? new VerifiedCache(redis.redis, cfg.cluster, { maxEntries: cfg.cacheMaxEntries, maxBytes: cfg.cacheMaxBytes, defaultTtlS: cfg.cacheTtlS }, "reader") : null;
  const store = redis ? new ResultStore(redis.redis, cfg.cluster, cfg.resultTtlS) : null;
  const tier = new TierReader(redis?.redis ?? null, cfg.cluster, { retryAfterS: cfg.retryAfterS, wakeEtaS: cfg.wakeEtaS });
  let queue: RequestQueue | null = null;
  let replayer: Replayer | null = null;
  const timers: NodeJS.Timeout[] = [];
  if (cfg.kafkaBrokers.length) {
    const kafka = kafkaClient({ brokers: cfg.kafkaBrokers, auth: cfg.kafkaAuth, ssl: cfg.kafkaTls, region: cfg.kafkaRegion ?? undefined, clientId: `llmha-fallback-${cfg.cluster}` }, log);
    const topic = cfg.kafkaTopic ?? topicFor(cfg.cluster);
    queue = new RequestQueue(kafka, topic, groupFor(cfg.cluster), log);
    await queue.ensureTopic(cfg.promptRetentionS).catch((err: unknown) => log.warn({ topic, err: (err as Error).message }, "fallback: topic not checked (Kafka unreachable); producing will create it"));
    // Published for `llm-ha status` and the other AZs' fallbacks: `llmha:<cluster>:fallback:queue` {depth, topic, updatedAt}.
    const queueKey = `llmha:${cfg.cluster}:fallback:queue`;
    const q = queue;
    metrics.queueDepthCap.set(cfg.maxQueueDepth);
    metrics.depthSource = () => q.depth;
    q.onRedirected = () => metrics.queueRedirected.inc();
    let sampling = false;
    const sample = (): void => {
      // One sample at a time: a slow broker does not pile admin calls up.
      if (sampling) return;
      sampling = true;
      q.sampleLagDetail().then(
        (lag) => {
          const d = lag.total;
          metrics.consumerLag.set(d);
          metrics.consumerLagPartitions.set(lag.byPartition.size);
          metrics.lagSampledAt.set(Date.now() / 1000);
          redis?.redis.multi().hset(queueKey, { depth: d, topic, updatedAt: Date.now() }).pexpire(queueKey, 30_000).exec().catch(() => undefined);
        },
        () => {
          metrics.lagSampleErrors.inc();
          metrics.consumerLag.set(-1);
          metrics.consumerLagPartitions.set(-1);
        },
      ).finally(() => {
        sampling = false;
      });
    };
    sample();
    timers.push(setInterval(sample, 2000));
    if (cfg.replay && store) {
      replayer = new Replayer({
        kafka, topic, groupId: groupFor(cfg.cluster), l1Url: cfg.l1Url, rps: cfg.replayRps, maxAttempts: cfg.replayAttempts, timeoutMs: cfg.replayTimeoutMs,
        deadlineMs: cfg.replayDeadlineMs, concurrency: cfg.replayConcurrency, sessionTimeoutMs: cfg.replaySessionTimeoutMs,
        acceptWindowMs: queue.produceTimeoutMs + 10_000, cacheReplayedTenants: cfg.cacheReplayedTenants,
        store, cache, tier, metrics, log,
      });
      replayer.start().catch((err: unknown) => log.error({ err: (err as Error).message }, "fallback: replay consumer did not start"));
    }
  }
  // The tier as this fallback reads it, kept fresh for the scrape (requests also refresh it).
  const readTier = (): void => {
    tier.read().then((t) => metrics.l4.set(t.level === "L4" ? 1 : t.level === null ? -1 : 0), () => metrics.l4.set(-1));
  };
  readTier();
  timers.push(setInterval(readTier, 2000));
  if (cache) {
    timers.push(setInterval(() => {
      cache.stats().then((s) => {
        metrics.cacheEntries.set(s.entries);
        metrics.cacheBytes.set(s.bytes);
      }, () => undefined);
    }, 5000));
  }
  const service = new FallbackService({
    models, maxBodyBytes: cfg.maxBodyBytes, maxQueueDepth: cfg.maxQueueDepth, queueRoutes: cfg.queueRoutes, upstreamWhen: cfg.upstreamWhen,
    cache, providers, queue, store, tier, metrics, log, cacheReplayedTenants: cfg.cacheReplayedTenants,
    budget: new TenantTokenBudget(cfg.tenantTokensPerMin),
  });
  for (const p of providers) {
    metrics.misconfigured.inc({ provider: p.name }, 0);
    metrics.providerMisconfigured.set({ provider: p.name }, 0);
  }
  // A port in use ends start-up with one line naming the setting (serveCommand), as the metrics listener's does.
  const port = await service.listen(cfg.port, cfg.host, "LLMHA_FALLBACK_PORT");
  let metricsServer: FallbackMetricsServer | null = null;
  let metricsPort: number | null = null;
  if (cfg.metricsAddr) {
    metricsServer = new FallbackMetricsServer(metrics);
    try {
      metricsPort = await metricsServer.listen(cfg.metricsAddr.port, cfg.metricsAddr.host);
    } catch (err) {
      for (const t of timers) clearInterval(t);
      await service.close();
      await replayer?.stop();
      await queue?.close();
      await redis?.close();
      throw err;
    }
  }
  log.info({ port, metrics: cfg.metricsAddr ? `${cfg.metricsAddr.host}:${metricsPort}` : "off", models, providers: providers.map((p) => p.toJSON()), queue: queue?.topic ?? null, cache: cache !== null }, "fallback listening");
  return {
    port, metricsPort, service, metrics,
    async close() {
      for (const t of timers) clearInterval(t);
      await metricsServer?.close();
      await service.close();
      await replayer?.stop();
      await queue?.close();
      await redis?.close();
    },
  };
}

export function fallbackCommand(argv: string[]): Promise<number> {
  return serveCommand(argv, {
    name: "fallback",
    help: fallbackHelp,
    start: () => runFallback(loadFallbackConfig(argv, process.env)),
    isConfigError: (err) => err instanceof FallbackConfigError || err instanceof ProviderConfigError,
  });
}

const CACHE_USAGE = `Usage:
  llm-ha cache import FILE.jsonl   add verified answers: one {"request": {...}, "answer": "...", "ttlSeconds"?: N} per line
  llm-ha cache list [--json|-o json]  entries, most recently used first
  llm-ha cache rm KEY...           remove entries (full key or a unique prefix of ≥ 8 hex digits)
Redis from LLMHA_REDIS_URL (or --redis-url), namespace LLMHA_CLUSTER (or --cluster).
`;

export async function cacheCommand(argv: string[], out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Promise<number> {
  const [sub, ...rest0] = argv;
  if (sub === "--help" || sub === "-h" || sub === "help") {
    out.write(CACHE_USAGE);
    return 0;
  }
  const subs = ["import", "list", "rm"];
  if (!sub || !subs.includes(sub)) {
    err.write(`llm-ha cache: ${sub ? `unknown subcommand ${JSON.stringify(sub)}${didYouMean(sub, subs)}` : "which one: import, list or rm?"} (see llm-ha cache --help)\n`);
    return 2;
  }
  const rest: string[] = [];
  let redisUrl = process.env.LLMHA_REDIS_URL ?? "";
  let cluster = process.env.LLMHA_CLUSTER ?? "default";
  let json = false;
  for (let i = 0; i < rest0.length; i++) {
    const a = rest0[i];
    if (a === "--redis-url") redisUrl = rest0[++i] ?? "";
    else if (a.startsWith("--redis-url=")) redisUrl = a.slice(12);
    else if (a === "--cluster") cluster = rest0[++i] ?? "";
    else if (a.startsWith("--cluster=")) cluster = a.slice(10);
    else if (a === "--json" || a === "-o=json" || a === "--output=json") json = true;
    else if (a === "-o" || a === "--output") {
      const v = rest0[++i];
      if (v !== "json" && v !== "text") {
        err.write(`llm-ha cache: -o/--output must be json or text, got ${JSON.stringify(v ?? "")}\n`);
        return 2;
      }
      json = v === "json";
    } else if (a.startsWith("-")) {
      err.write(`llm-ha cache: unknown flag ${a}${didYouMean(a.split("=")[0], ["--redis-url", "--cluster", "--json", "--output"])} (see llm-ha cache --help)\n`);
      return 2;
    } else rest.push(a);
  }
  if (!redisUrl) {
    err.write("llm-ha cache: LLMHA_REDIS_URL (or --redis-url) is required\n");
    return 2;
  }
  const log = createLogger({ level: "silent" });
  const client = createRedisClient(redisUrl, { name: "llmha-cache-cli", log, commandTimeoutMs: 5000 });
  try {
    if (!(await client.whenReady(3000))) {
      err.write(`llm-ha cache: cannot reach Redis at ${client.safeUrl}\n`);
      return 1;
    }
    const cache = new VerifiedCache(client.redis, cluster, {
      maxEntries: Number(process.env.LLMHA_FALLBACK_CACHE_MAX_ENTRIES ?? 10_000),
      maxBytes: Number(process.env.LLMHA_FALLBACK_CACHE_MAX_BYTES ?? 64 * 1024 * 1024),
      defaultTtlS: Number(process.env.LLMHA_FALLBACK_CACHE_TTL_S ?? 604_800),
    });
    if (sub === "import") {
      if (rest.length !== 1) {
        err.write(`llm-ha cache import: one FILE.jsonl\n`);
        return 2;
      }
      let text: string;
      try {
        text = rest[0] === "-" ? readFileSync(0, "utf8") : readFileSync(rest[0], "utf8");
      } catch (e) {
        err.write(`llm-ha cache import: cannot read ${rest[0]} (${(e as NodeJS.ErrnoException).code ?? "error"})\n`);
        return 1;
      }
      try {
        const r = await cache.importJsonl(text);
        out.write(json ? JSON.stringify(r) + "\n" : `imported ${r.imported} entries${r.evicted ? `, evicted ${r.evicted} (cache bounds)` : ""}\n`);
        return 0;
      } catch (e) {
        if (e instanceof CacheImportError) {
          err.write(`llm-ha cache import: ${rest[0]}: ${e.message} (nothing imported)\n`);
          return 1;
        }
        throw e;
      }
    }
    if (sub === "list") {
      const entries = await cache.list();
      if (json) {
        const rows = entries.map((e) => ({ key: e.key, kind: e.kind, model: e.model, source: e.source, bytes: e.bytes, ttlLeftS: e.ttlLeftS, lastUsedAt: e.lastUsedAt, request: e.request, answer: e.answer }));
        out.write(JSON.stringify({ version: 1, cluster, entries: rows }) + "\n");
        return 0;
      }
      const s = await cache.stats();
      out.write(`${s.entries} entries, ${s.bytes} B (bounds: ${cache.limits.maxEntries} entries, ${cache.limits.maxBytes} B)\n`);
      for (const e of entries) {
        const prompt = JSON.stringify(e.request.input).slice(0, 60);
        out.write(`${e.key.slice(0, 16)}  ${e.kind.padEnd(11)} ${e.model.padEnd(20)} ${e.source.padEnd(6)} ttl ${String(e.ttlLeftS).padStart(7)}s  ${prompt}\n`);
      }
      return 0;
    }
    if (rest.length === 0) {
      err.write("llm-ha cache rm: name at least one key\n");
      return 2;
    }
    const removed = await cache.rm(rest);
    out.write(json ? JSON.stringify({ removed }) + "\n" : `removed ${removed.length} of ${rest.length}\n`);
    return removed.length === rest.length ? 0 : 1;
  } finally {
    await client.close();
  }
}
