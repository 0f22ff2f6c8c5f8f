/** Prometheus metrics of `llm-ha fallback` (names start with `llmha_fallback_`). */
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export const FALLBACK_OUTCOMES = ["cache_hit", "upstream", "queued", "unavailable", "rejected"] as const;
export type FallbackOutcome = (typeof FALLBACK_OUTCOMES)[number];

export class FallbackMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: "llmha_fallback_requests_total", help: "Requests the L4 fallback answered, by outcome (cache_hit, upstream, queued, unavailable = 503, rejected = 4xx).", labelNames: ["outcome"], registers: [this.registry] });
  readonly upstream = new Counter({ name: "llmha_fallback_upstream_attempts_total", help: "Attempts at external providers, by provider and result (ok, error, timeout, circuit_open).", labelNames: ["provider", "result"], registers: [this.registry] });
  readonly misconfigured = new Counter({ name: "llmha_fallback_provider_misconfigured_total", help: "Provider answers 401, 403 or 404: the key, its permissions or the model mapping is wrong (the next provider was tried).", labelNames: ["provider"], registers: [this.registry] });
  readonly providerMisconfigured = new Gauge({ name: "llmha_fallback_provider_misconfigured", help: "1 while a provider's last answer was 401, 403 or 404 (misconfigured), 0 once it answered.", labelNames: ["provider"], registers: [this.registry] });
  readonly breakerOpen = new Gauge({ name: "llmha_fallback_circuit_open", help: "1 while a provider's circuit breaker refuses requests.", labelNames: ["provider"], registers: [this.registry] });
  readonly cacheErrors = new Counter({ name: "llmha_fallback_cache_errors_total", help: "Cache lookups skipped because Redis failed.", registers: [this.registry] });
  readonly cacheEntries = new Gauge({ name: "llmha_fallback_cache_entries", help: "Entries in the verified-answer cache.", registers: [this.registry] });
  readonly cacheBytes = new Gauge({ name: "llmha_fallback_cache_bytes", help: "Bytes held by the verified-answer cache.", registers: [this.registry] });
  /** Where the depth comes from at scrape time (the queue's own estimate); unset: the last value set. */
  depthSource: (() => number | null) | null = null;
  readonly queueDepth = new Gauge({
    name: "llmha_fallback_queue_depth",
    help: "Queued requests not yet replayed as this fallback sees it: the last consumer-lag sample plus what it produced since (what the depth cap is compared with); -1 when unknown.",
    registers: [this.registry],
    collect: () => {
      if (this.depthSource) this.queueDepth.set(this.depthSource() ?? -1);
    },
  });
  readonly queueDepthCap = new Gauge({ name: "llmha_fallback_queue_depth_cap", help: "LLMHA_FALLBACK_MAX_QUEUE_DEPTH: at this depth opted-in requests get 503 + Retry-After; 0 without a queue.", registers: [this.registry] });
  readonly consumerLag = new Gauge({ name: "llmha_fallback_consumer_lag", help: "Messages of the queue topic the replay group has not committed, summed over partitions (end offset - committed offset, from Kafka's admin API); -1 when it cannot be read.", registers: [this.registry] });
  readonly consumerLagPartitions = new Gauge({ name: "llmha_fallback_consumer_lag_partitions", help: "Partitions of the queue topic with uncommitted messages; -1 when unknown.", registers: [this.registry] });
  readonly lagSampledAt = new Gauge({ name: "llmha_fallback_consumer_lag_sampled_timestamp_seconds", help: "When the consumer lag was last read from Kafka (Unix seconds); 0 never.", registers: [this.registry] });
  readonly lagSampleErrors = new Counter({ name: "llmha_fallback_consumer_lag_errors_total", help: "Consumer-lag samples that failed (Kafka unreachable or refusing the admin calls).", registers: [this.registry] });
  readonly queueRedirected = new Counter({ name: "llmha_fallback_queue_redirected_total", help: "Queued requests produced to another partition than their key's because its leader was unreachable (a broker lost; acknowledged all the same).", registers: [this.registry] });
  readonly queueErrors = new Counter({ name: "llmha_fallback_queue_errors_total", help: "Requests that opted in to the queue but Kafka did not acknowledge (answered 503).", registers: [this.registry] });
  readonly replayed = new Counter({ name: "llmha_fallback_replayed_total", help: "Queued requests replayed through L1, by result (done, failed, duplicate, cancelled = answered 503 and never run, interrupted = the replaying member died mid-request and it is not run again).", labelNames: ["result"], registers: [this.registry] });
  readonly replaySeconds = new Histogram({ name: "llmha_fallback_replay_seconds", help: "From queued to result stored.", buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600], registers: [this.registry] });
  readonly replayAttemptSeconds = new Histogram({ name: "llmha_fallback_replay_attempt_seconds", help: "One replayed request's round trip through the L1 proxy, by result (ok, refused = a 4xx/5xx the fleet gave, retry = the fleet still down).", labelNames: ["result"], buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600], registers: [this.registry] });
  readonly replayInFlight = new Gauge({ name: "llmha_fallback_replay_in_flight", help: "Queued requests this fallback is replaying now (at most LLMHA_FALLBACK_REPLAY_CONCURRENCY).", registers: [this.registry] });
  readonly l4 = new Gauge({ name: "llmha_fallback_tier_l4", help: "1 while the controller's published tier is L4 (the fleet cannot serve), 0 below, -1 unknown.", registers: [this.registry] });

  constructor() {
    this.queueDepth.set(-1);
    this.consumerLag.set(-1);
    this.consumerLagPartitions.set(-1);
    this.lagSampledAt.set(0);
    this.l4.set(-1);
    for (const o of FALLBACK_OUTCOMES) this.requests.inc({ outcome: o }, 0);
  }
}
