/**
 * The standby wake's series (`llmha_standby_wake_seconds`, its fallback steps, capacity
 * unavailable), one set per registry: the reconciler records them.
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export const WAKE_SECONDS_METRIC = "llmha_standby_wake_seconds";

/** The standby wake's series (one set per registry). */
export class WakeMetrics {
  readonly wakeSeconds: Histogram<"kind" | "path" | "trigger">;
  readonly fallbacks: Counter<"kind" | "class">;
  readonly unavailable: Gauge<"kind">;

  constructor(registry: Registry) {
    const registers = [registry];
    const get = <T>(name: string): T | undefined => registry.getSingleMetric(name) as T | undefined;
    this.wakeSeconds = get(WAKE_SECONDS_METRIC) ?? new Histogram({
      name: WAKE_SECONDS_METRIC,
      help: "Standby wake time: from the leader's decision to the first standby node serving (path: first-choice or fallback)",
      labelNames: ["kind", "path", "trigger"],
      buckets: [1, 2, 5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800],
      registers,
    });
    this.fallbacks = get("llmha_standby_wake_fallbacks_total") ?? new Counter({
      name: "llmha_standby_wake_fallbacks_total",
      help: "Fallback steps woken because the step before could not launch, by the failure's class (capacity, quota, launch-config, timeout, unknown)",
      labelNames: ["kind", "class"],
      registers,
    });
    this.unavailable = get("llmha_standby_capacity_unavailable") ?? new Gauge({
      name: "llmha_standby_capacity_unavailable",
      help: "1 while the standby is wanted awake and every step of its fallback order failed to launch",
      labelNames: ["kind"],
      registers,
    });
  }
}
