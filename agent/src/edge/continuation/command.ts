/** `llm-ha continue`: the continuation relay of the L1 pod, with its metrics listener. */
import { FallbackMetricsServer } from "../fallback/metrics-server";
import { createLogger, type Logger } from "../../util/log";
import { ContinueConfigError, continueHelp, loadContinueConfig, type ContinueConfig } from "./config";
import { ContinuationMetrics } from "./metrics";
import { ContinuationRelay } from "./relay";
import { serveCommand } from "../serve";

export interface RunningContinuation {
  port: number;
  metricsPort: number | null;
  relay: ContinuationRelay;
  metrics: ContinuationMetrics;
  close(): Promise<void>;
}

/** Starts the relay (and its metrics listener) from a configuration. */
export async function runContinuation(cfg: ContinueConfig, opts: { log?: Logger } = {}): Promise<RunningContinuation> {
  const log = opts.log ?? createLogger({ level: cfg.logLevel, name: "llm-ha-continue" });
  const metrics = new ContinuationMetrics(cfg.kind);
  const relay = new ContinuationRelay({
    upstream: cfg.upstream,
    kind: cfg.kind,
    stallMs: cfg.stallMs,
    resendDelayMs: cfg.resendDelayMs,
    maxBodyBytes: cfg.maxBodyBytes,
    upstreamPool: cfg.upstreamPool,
    metrics,
    // Only what happened and how much was delivered: never the prompt or the answer.
    log: (msg, fields) => log.info(fields, msg),
  });
  const port = cfg.socket ? await relay.listenSocket(cfg.socket) : await relay.listen(cfg.port, cfg.host);
  const metricsServer = new FallbackMetricsServer(metrics);
  const metricsPort = cfg.metricsAddr ? await metricsServer.listen(cfg.metricsAddr.port, cfg.metricsAddr.host) : null;
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

export function continueCommand(argv: string[]): Promise<number> {
  return serveCommand(argv, {
    name: "continue",
    help: continueHelp,
    start: () => runContinuation(loadContinueConfig(argv, process.env)),
    isConfigError: (err) => err instanceof ContinueConfigError,
  });
}
