/**
 * prom-client's metric classes and default process metrics, loaded without prom-client's index.
 * The index loads every default metric module, and one of them (process CPU) loads
 * `@opentelemetry/api` — 44 modules, about 7 MiB resident — for exemplars the agent never turns
 * on. On a GPU node the agent's memory is a budget (docs/bench.md), so the node side takes the
 * classes from their own files and builds the same default series here, CPU included, under the
 * same names. The classes are prom-client's own: a registry from here and metrics from the index
 * (the controller, the edge) are the same code.
 */
import type * as Prom from "prom-client";

/* eslint-disable @typescript-eslint/no-require-imports -- prom-client ships types for its index only; these are its own files */
export const Registry = require("prom-client/lib/registry") as typeof Prom.Registry;
export const Counter = require("prom-client/lib/counter") as typeof Prom.Counter;
export const Gauge = require("prom-client/lib/gauge") as typeof Prom.Gauge;
export const Histogram = require("prom-client/lib/histogram") as typeof Prom.Histogram;
export type Registry = Prom.Registry;
export type Counter = Prom.Counter;
export type Gauge = Prom.Gauge;
export type Histogram = Prom.Histogram;

type DefaultMetric = (registry: Prom.Registry, config: { prefix: string; eventLoopMonitoringPrecision: number }) => void;
/** prom-client's default metrics (lib/defaultMetrics.js) except process CPU, which `processCpu` below replaces. */
const DEFAULT_METRICS = [
  "processStartTime",
  "osMemoryHeap",
  "processOpenFileDescriptors",
  "processMaxFileDescriptors",
  "eventLoopLag",
  ...(typeof (process as { getActiveResourcesInfo?: unknown }).getActiveResourcesInfo === "function" ? ["processResources"] : []),
  "processHandles",
  "processRequests",
  "heapSizeAndUsed",
  "heapSpacesSizeAndUsed",
  "version",
  "gc",
] as const;
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * How often the event-loop delay is sampled, ms. Each sample wakes the process: prom-client's
 * default (10 ms) alone was about 0.3 % of a core on the 2-core machine, more than half the agent's
 * budget, and at 100 ms it was still 0.08 points measured side by side. The agent's own work runs
 * once a second, so a sample a second still sees a loop stalled for longer than that.
 */
export const EVENT_LOOP_SAMPLE_MS = 1000;

/** The process CPU counters prom-client's default metrics carry (`process_cpu_*_seconds_total`), without exemplars. */
function processCpu(registry: Prom.Registry, prefix: string): void {
  let last = process.cpuUsage();
  const user: Prom.Counter = new Counter({
    name: `${prefix}process_cpu_user_seconds_total`,
    help: "Total user CPU time spent in seconds.",
    registers: [registry],
    // One collect sets all three, as prom-client's does.
    collect() {
      const now = process.cpuUsage();
      const u = now.user - last.user;
      const s = now.system - last.system;
      last = now;
      user.inc(u / 1e6);
      system.inc(s / 1e6);
      total.inc((u + s) / 1e6);
    },
  });
  const system = new Counter({ name: `${prefix}process_cpu_system_seconds_total`, help: "Total system CPU time spent in seconds.", registers: [registry] });
  const total = new Counter({ name: `${prefix}process_cpu_seconds_total`, help: "Total user and system CPU time spent in seconds.", registers: [registry] });
}

/** prom-client's `collectDefaultMetrics` for `registry`: the same series, without `@opentelemetry/api`. */
export function collectProcessMetrics(registry: Prom.Registry, prefix: string): void {
  processCpu(registry, prefix);
  for (const name of DEFAULT_METRICS) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- see the top of this file
    const add = require(`prom-client/lib/metrics/${name}`) as DefaultMetric;
    add(registry, { prefix, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  }
}
