/** `llm-ha continue`: the continuation relay of the L1 pod, with its metrics listener. */
import { FallbackMetricsServer } from "../fallback/metrics-server";
import { createLogger, type Logger } from "../../util/log";
import { ContinueConfigError, continueHelp, loadContinueConfig, type ContinueConfig } from "./config";
import { ContinuationMetrics } from "./metrics";
import { ContinuationRelay } from "./relay";

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
    maxBodyBytes: cfg.maxBodyBytes,
    metrics,
    // Only what happened and how much was delivered: never the prompt or the answer.
    log: (msg, fields) => log.info(fields, msg),
  });
  const port = await relay.listen(cfg.port, cfg.host);
  const metricsServer = new FallbackMetricsServer(metrics);
  const metricsPort = cfg.metricsAddr ? await metricsServer.listen(cfg.metricsAddr.port, cfg.metricsAddr.host) : null;
  log.info({ port, upstream: `${cfg.upstream.host}:${cfg.upstream.port}`, kind: cfg.kind, metricsPort }, "continue: listening");
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

export async function continueCommand(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(continueHelp());
    return 0;
  }
  let running: RunningContinuation;
  try {
    running = await runContinuation(loadContinueConfig(argv, process.env));
  } catch (err) {
    if (err instanceof ContinueConfigError) {
      process.stderr.write(`llm-ha continue: bad configuration: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const stop = (): void => {
    void running.close().then(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  return -1;
}
