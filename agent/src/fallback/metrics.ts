/** Prometheus metrics of `llm-ha fallback` (names start with `llmha_fallback_`). */
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export const FALLBACK_OUTCOMES = ["cache_hit", "upstream", "queued", "unavailable", "rejected"] as const;
export type FallbackOutcome = (typeof FALLBACK_OUTCOMES)[number];

export class FallbackMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: "llmha_fallback_requests_total", help: "Requests the L4 fallback answered, by outcome (cache_hit, upstream, queued, unavailable = 503, rejected = 4xx).", labelNames: ["outcome"], registers: [this.registry] });
  readonly upstream = new Counter({ name: "llmha_fallback_upstream_attempts_total", help: "Attempts at external providers, by provider and result (ok, error, timeout, circuit_open).", labelNames: ["provider", "result"], registers: [this.registry] });
  readonly breakerOpen = new Gauge({ name: "llmha_fallback_circuit_open", help: "1 while a provider's circuit breaker refuses requests.", labelNames: ["provider"], registers: [this.registry] });
  readonly cacheErrors = new Counter({ name: "llmha_fallback_cache_errors_total", help: "Cache lookups skipped because Redis failed.", registers: [this.registry] });
  readonly cacheEntries = new Gauge({ name: "llmha_fallback_cache_entries", help: "Entries in the verified-answer cache.", registers: [this.registry] });
  readonly cacheBytes = new Gauge({ name: "llmha_fallback_cache_bytes", help: "Bytes held by the verified-answer cache.", registers: [this.registry] });
  readonly queueDepth = new Gauge({ name: "llmha_fallback_queue_depth", help: "Queued requests not yet replayed (consumer lag of the replay group plus produced since the sample); -1 when unknown.", registers: [this.registry] });
  readonly queueErrors = new Counter({ name: "llmha_fallback_queue_errors_total", help: "Requests that opted in to the queue but Kafka did not acknowledge (answered 503).", registers: [this.registry] });
  readonly replayed = new Counter({ name: "llmha_fallback_replayed_total", help: "Queued requests replayed through L1, by result (done, failed, duplicate).", labelNames: ["result"], registers: [this.registry] });
  readonly replaySeconds = new Histogram({ name: "llmha_fallback_replay_seconds", help: "From queued to result stored.", buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600], registers: [this.registry] });
  readonly l4 = new Gauge({ name: "llmha_fallback_tier_l4", help: "1 while the controller's published tier is L4 (the fleet cannot serve), 0 below, -1 unknown.", registers: [this.registry] });

  constructor() {
    this.queueDepth.set(-1);
    this.l4.set(-1);
    for (const o of FALLBACK_OUTCOMES) this.requests.inc({ outcome: o }, 0);
  }
}
