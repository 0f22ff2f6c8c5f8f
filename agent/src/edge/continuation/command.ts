/** `llm-ha continue`: the continuation relay of the L1 pod, with its metrics listener. */
import cluster from "node:cluster";
import { FallbackMetricsServer } from "../fallback/metrics-server";
import { createLogger, type Logger } from "../../util/log";
import { relayWorkerPort, relayWorkerSocket } from "../../../../contracts/continuation";
import { ContinueConfigError, continueHelp, loadContinueConfig, workerPool, type ContinueConfig } from "./config";
import { ContinuationMetrics } from "./metrics";
import { ContinuationRelay } from "./relay";
import { serveCommand } from "../serve";
import { runContinuationPrimary, serveMetricsToPrimary, tellPrimaryListening } from "./workers";

export interface RunningContinuation {
  port: number;
  metricsPort: number | null;
  relay: ContinuationRelay;
  metrics: ContinuationMetrics;
  close(): Promise<void>;
}

/**
 * Starts the relay (and its metrics listener) from a configuration. In a worker of
 * `LLMHA_CONTINUE_WORKERS` (workers.ts) it listens on its own socket or port, takes its share of
 * the pool, and hands its metrics to the primary instead of listening for them.
 */
export async function runContinuation(cfg: ContinueConfig, opts: { log?: Logger } = {}): Promise<RunningContinuation> {
  const worker = cluster.isWorker ? Number(process.env.LLMHA_CONTINUE_WORKER ?? 0) : null;
  const log = opts.log ?? createLogger({ level: cfg.logLevel, name: "llm-ha-continue" }).child(worker === null ? {} : { worker });
  if (worker !== null) {
    cfg = {
      ...cfg,
      socket: cfg.socket && relayWorkerSocket(cfg.socket, worker, cfg.workers),
      port: cfg.port === 0 ? 0 : relayWorkerPort(cfg.port, worker, cfg.workers),
      upstreamPool: workerPool(cfg.upstreamPool, cfg.workers),
      metricsAddr: null,
    };
  }
  const metrics = new ContinuationMetrics(cfg.kind);
  if (worker !== null) serveMetricsToPrimary(metrics.registry);
  const relay = new ContinuationRelay({
    upstream: cfg.upstream,
    kind: cfg.kind,
    stallMs: cfg.stallMs,
    resendDelayMs: cfg.resendDelayMs,
    maxBodyBytes: cfg.maxBodyBytes,
    upstreamPool: cfg.upstreamPool,
    ...(cfg.source ? { source: cfg.source } : {}),
    metrics,
    // Only what happened and how much was delivered: never the prompt or the answer.
    log: (msg, fields) => log.info(fields, msg),
  });
  // A worker's listener is its own (`exclusive`): it accepts its connections itself, where a
  // listener shared through the primary would pass each new one over the primary's pipe.
  const exclusive = worker !== null;
  const port = cfg.socket ? await relay.listenSocket(cfg.socket, { exclusive }) : await relay.listen(cfg.port, cfg.host, { exclusive });
  if (worker !== null) tellPrimaryListening();
  const metricsServer = new FallbackMetricsServer(metrics);
  const metricsPort = cfg.metricsAddr ? await metricsServer.listen(cfg.metricsAddr.port, cfg.metricsAddr.host, "LLMHA_CONTINUE_METRICS_ADDR") : null;
  const up = cfg.upstream;
  log.info({ port, socket: cfg.socket, upstream: "path" in up ? `unix@${up.path}` : `${up.host}:${up.port}`, upstreamMaxSockets: cfg.upstreamPool.maxSockets, upstreamMaxFreeSockets: cfg.upstreamPool.maxFreeSockets, kind: cfg.kind, metricsPort }, "continue: listening");
  return {
    port,
    metricsPort,
    relay,
    metrics,
    async close() {
      await Promise.all([relay.close(), metricsServer.close()]);
    },
  };
}

/** The primary of several workers: it relays nothing, and exits 1 when a worker could not start. */
async function startPrimary(cfg: ContinueConfig): Promise<{ close(): Promise<void> }> {
  const log = createLogger({ level: cfg.logLevel, name: "llm-ha-continue" });
  const primary = await runContinuationPrimary(cfg, log);
  log.info({ workers: cfg.workers, socket: cfg.socket, port: cfg.socket ? null : cfg.port, metricsPort: primary.metricsPort }, `continue: ${cfg.workers} relay workers starting`);
  void primary.failed.then(async (err) => {
    process.stderr.write(`llm-ha continue: ${err.message}\n`);
    await primary.close();
    process.exit(1);
  });
  return primary;
}

export function continueCommand(argv: string[]): Promise<number> {
  return serveCommand(argv, {
    name: "continue",
    help: continueHelp,
    start: () => {
      const cfg = loadContinueConfig(argv, process.env);
      return cfg.workers > 1 && cluster.isPrimary ? startPrimary(cfg) : runContinuation(cfg);
    },
    isConfigError: (err) => err instanceof ContinueConfigError,
  });
}
