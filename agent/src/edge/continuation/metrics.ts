/** Prometheus metrics of `llm-ha continue` (names start with `llmha_continue_`). */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { CONTINUATION_OUTCOMES } from "../../../../contracts/continuation";

export class ContinuationMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: "llmha_continue_requests_total", help: "Completions the relay watched, by route (chat, completions) and stream (true, false).", labelNames: ["route", "stream"], registers: [this.registry] });
  readonly outcomes = new Counter({
    name: "llmha_continue_outcomes_total",
    help: "Requests whose server failed under them, by outcome (continued, restarted, retried, failed_twice = the query-of-death guard stopped it, tool_calls, not_continuable, mismatch, failed) and server kind.",
    labelNames: ["outcome", "kind"],
    registers: [this.registry],
  });
  readonly added = new Histogram({
    name: "llmha_continue_added_seconds",
    help: "What a continuation added: from the failure seen to the second server's first chunk sent on, by how (continue, restart, retry).",
    labelNames: ["how"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly open = new Gauge({ name: "llmha_continue_open_streams", help: "Streams the relay carries now.", registers: [this.registry] });
  readonly deliveredBytes = new Gauge({ name: "llmha_continue_delivered_bytes", help: "Delivered text the relay holds for its open streams (what memory per stream is bounded by).", registers: [this.registry] });

  constructor(kind: string) {
    for (const o of CONTINUATION_OUTCOMES) this.outcomes.inc({ outcome: o, kind }, 0);
  }
}
