/**
 * `llm-ha continue` with `LLMHA_CONTINUE_WORKERS` above 1: one Node process relays on one core at
 * most, and under many open streams a burst of chunks (every stream's next token falling due
 * together) waits in its one event loop behind the others. A primary process forks the workers
 * (node:cluster), each on a listener of its own (`relayWorkerSocket`, `relayWorkerPort`), which
 * HAProxy's relay backend lists as one server each and balances by its count of open streams
 * (`leastconn`, contracts/haproxy-sidecars.ts), checking each. The primary relays nothing: it
 * serves the metrics listener with the workers' series summed (prom-client's AggregatorRegistry),
 * answers `/healthz` 503 while a worker is missing, replaces a worker that dies, and stops them
 * all on SIGTERM. Each stream lives in one worker: a worker that dies cuts its own streams only,
 * and HAProxy sends new ones to the others until it is back.
 *
 * Measured first with one listener shared through the primary (node:cluster's round robin): each
 * new connection then crossed the primary's pipe, and two workers did worse than one under a
 * steady 1,000 streams (docs/bench.md).
 */
import cluster, { type Worker } from "node:cluster";
import { AggregatorRegistry, type Registry } from "prom-client";
import { FallbackMetricsServer } from "../fallback/metrics-server";
import type { Logger } from "../../util/log";
import type { ContinueConfig } from "./config";

/** How long a stopping primary waits for its workers to close before it kills them. */
const WORKER_STOP_MS = 10_000;
/** Pause before a dead worker is replaced (a worker that dies at once every time is not forked in a tight loop). */
const RESPAWN_MS = 1000;

export interface RunningPrimary {
  metricsPort: number | null;
  /** Stops the workers (SIGTERM, then SIGKILL after `WORKER_STOP_MS`) and the metrics listener. */
  close(): Promise<void>;
  /** Settles when a worker exits before it ever listened: start-up failed (the message says which worker and how). */
  failed: Promise<Error>;
}

/** What a worker sends its primary once its listener is up. */
const WORKER_LISTENING = "llm-ha:continue-worker-listening";

/** In a worker: tells the primary its listener is up. */
export function tellPrimaryListening(): void {
  process.send?.({ type: WORKER_LISTENING });
}

/** In a worker: its metrics go to the primary when it asks (the workers' own listener is off). */
export function serveMetricsToPrimary(registry: Registry): void {
  // The constructor installs the worker's answer to the primary's requests; the registry is what it sends.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
}

/** Forks `cfg.workers` relays, each on its own listener, and serves their metrics. */
export async function runContinuationPrimary(cfg: ContinueConfig, log: Logger): Promise<RunningPrimary> {
  const aggregate = new AggregatorRegistry();
  const up = new Set<Worker>();
  const everUp = new WeakSet<Worker>();
  let stopping = false;
  let fail: (err: Error) => void = () => undefined;
  const failed = new Promise<Error>((resolve) => (fail = resolve));

  const fork = (slot: number): void => {
    const w = cluster.fork({ LLMHA_CONTINUE_WORKER: String(slot) });
    // A worker's listener is its own, not the cluster's: the worker says when it listens.
    w.on("message", (m: unknown) => {
      if ((m as { type?: unknown } | null)?.type !== WORKER_LISTENING) return;
      up.add(w);
      everUp.add(w);
      log.info({ worker: slot, workerPid: w.process.pid }, `continue: worker ${slot} listening`);
    });
    w.on("exit", (code, signal) => {
      up.delete(w);
      if (stopping) return;
      const how = signal ? `signal ${signal}` : `code ${code}`;
      if (!everUp.has(w)) return fail(new Error(`relay worker ${slot} exited with ${how} before it listened`));
      log.error({ worker: slot, code, signal }, `continue: worker ${slot} exited (${how}); its open streams were cut; replacing it`);
      setTimeout(() => !stopping && fork(slot), RESPAWN_MS).unref();
    });
  };
  const unhealthy = (): string | null => (up.size === cfg.workers ? null : `${up.size} of ${cfg.workers} relay workers listening`);
  const metricsServer = new FallbackMetricsServer({ registry: { metrics: () => aggregate.clusterMetrics(), contentType: aggregate.contentType } }, unhealthy);
  // Before any worker exists: a metrics address in use stops start-up with nothing forked.
  const metricsPort = cfg.metricsAddr ? await metricsServer.listen(cfg.metricsAddr.port, cfg.metricsAddr.host, "LLMHA_CONTINUE_METRICS_ADDR") : null;
  for (let slot = 0; slot < cfg.workers; slot++) fork(slot);
  return {
    metricsPort,
    failed,
    async close() {
      stopping = true;
      const all = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
      await Promise.all(
        all.map(
          (w) =>
            new Promise<void>((resolve) => {
              const kill = setTimeout(() => w.process.kill("SIGKILL"), WORKER_STOP_MS);
              w.once("exit", () => {
                clearTimeout(kill);
                resolve();
              });
              w.process.kill("SIGTERM");
            }),
        ),
      );
      await metricsServer.close();
    },
  };
}
