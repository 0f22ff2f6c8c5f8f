import { Counter, Gauge, Histogram, Registry, collectProcessMetrics } from "../../util/prom";
import { NODE_STATUSES, type Decision } from "../../types";
import type { Signals } from "../sources/signals";
import { REASON_CODES } from "../../../../contracts/reasons";


export const SOURCE_NAMES = ["gpu", "model", "probe", "engine", "xid"] as const;
export type SourceName = (typeof SOURCE_NAMES)[number];
export const AGENT_CHECK_REPLIES = ["up", "drain", "down"] as const;

/**
 * The agent's metrics, on a registry it owns. Every labelled series is created at zero
 * at start-up, so dashboards and alerts see 0 rather than nothing.
 */
export class AgentMetrics {
  readonly registry: Registry;
  private readonly status: Gauge;
  private readonly weight: Gauge;
  private readonly loadScore: Gauge;
  private readonly reason: Gauge;
  private readonly pending: Gauge;
  private readonly transitions: Counter;
  private readonly sourceDuration: Histogram;
  private readonly sourceErrors: Counter;
  private readonly gpus: Gauge;
  private readonly gpusExpected: Gauge;
  private readonly gpuTemp: Gauge;
  private readonly gpuPower: Gauge;
  private readonly gpuEcc: Gauge;
  private readonly gpuUtil: Gauge;
  private readonly probeLatency: Histogram;
  private readonly engineRunning: Gauge;
  private readonly engineWaiting: Gauge;
  private readonly engineKv: Gauge;
  private readonly engineCorrupted: Gauge;
  readonly agentCheckReplies: Counter;
  readonly lastDetection: Gauge;
  readonly loopLag: Gauge;
  /** Epoch ms of the last decision, for `llmha_evaluation_age_seconds`. */
  private lastDecisionAt: number | null = null;
  /** What the labelled decision series and the source series show now (written only on a change). */
  private decisionShown = "";
  private gpuShown: Signals["gpu"] = undefined;
  private engineShown: Signals["engine"] = undefined;
  /** The signals the GPU and engine series show, written from them when scraped (`signals`). */
  private shown: { signals: Signals; expected: number | null } | null = null;
  /** The last GPU sample that told something about the GPUs: what the GPU series show. */
  private lastTelling: Signals["gpu"] = undefined;

  constructor(nodeId: string, az: string, registry = new Registry()) {
    this.registry = registry;
    registry.setDefaultLabels({ node: nodeId, az });
    collectProcessMetrics(registry, "llmha_process_");
    const r = [registry];
    // The GPU and engine series are written when scraped, from the latest samples: the sources
    // read several times a second, a scrape comes every 15 s or so, and each labelled write hashes its labels.
    const write = (): void => this.writeSources();
    this.status = new Gauge({ name: "llmha_node_status", help: "1 for the node's current status, 0 for the others", labelNames: ["status"], registers: r });
    this.weight = new Gauge({ name: "llmha_node_weight_percent", help: "Share of the HAProxy weight the node asks for", registers: r });
    this.loadScore = new Gauge({ name: "llmha_node_load_score", help: "Load score (lower is better)", registers: r });
    this.reason = new Gauge({ name: "llmha_node_reason_active", help: "1 while a reason is acted on", labelNames: ["code"], registers: r });
    this.pending = new Gauge({ name: "llmha_node_reason_pending", help: "1 while a soft fault is seen but below fall", labelNames: ["code"], registers: r });
    this.transitions = new Counter({ name: "llmha_node_transitions_total", help: "Status changes", labelNames: ["to"], registers: r });
    this.sourceDuration = new Histogram({
      name: "llmha_source_duration_seconds",
      help: "Time a source took",
      labelNames: ["source"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    });
    this.sourceErrors = new Counter({ name: "llmha_source_errors_total", help: "Source results that were errors or timeouts", labelNames: ["source"], registers: r });
    this.gpus = new Gauge({ name: "llmha_gpus_visible", help: "GPUs nvidia-smi lists", registers: r, collect: write });
    this.gpusExpected = new Gauge({ name: "llmha_gpus_expected", help: "GPUs expected (LLMHA_GPU_COUNT; 0 when unset)", registers: r, collect: write });
    this.gpuTemp = new Gauge({ name: "llmha_gpu_temperature_celsius", help: "GPU temperature", labelNames: ["gpu"], registers: r, collect: write });
    this.gpuPower = new Gauge({ name: "llmha_gpu_power_watts", help: "GPU power draw", labelNames: ["gpu"], registers: r, collect: write });
    this.gpuEcc = new Gauge({ name: "llmha_gpu_ecc_uncorrected_volatile", help: "Uncorrected volatile ECC errors", labelNames: ["gpu"], registers: r, collect: write });
    this.gpuUtil = new Gauge({ name: "llmha_gpu_utilization_percent", help: "GPU utilization", labelNames: ["gpu"], registers: r, collect: write });
    this.probeLatency = new Histogram({
      name: "llmha_probe_latency_seconds",
      help: "Latency of the probe completion",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers: r,
    });
    this.engineRunning = new Gauge({ name: "llmha_engine_requests_running", help: "Requests the engine runs", registers: r, collect: write });
    this.engineWaiting = new Gauge({ name: "llmha_engine_requests_waiting", help: "Requests waiting in the engine", registers: r, collect: write });
    this.engineKv = new Gauge({ name: "llmha_engine_kv_cache_usage_ratio", help: "KV-cache usage, 0-1", registers: r, collect: write });
    this.engineCorrupted = new Gauge({ name: "llmha_engine_corrupted_requests", help: "The engine's count of requests whose logits went NaN (vLLM vllm:corrupted_requests) as last read; 0 where the engine does not export it", registers: r, collect: write });
    this.agentCheckReplies = new Counter({ name: "llmha_agent_check_replies_total", help: "HAProxy agent-check replies", labelNames: ["reply"], registers: r });
    this.lastDetection = new Gauge({
      name: "llmha_detection_seconds",
      help: "Time from the first failing result to the node leaving service, last fault",
      registers: r,
    });
    const lastAt = (): number | null => this.lastDecisionAt;
    this.loopLag = new Gauge({
      name: "llmha_evaluation_age_seconds",
      help: "Age of the last evaluation at scrape time (grows when the agent's loop is stuck)",
      registers: r,
      collect() {
        const at = lastAt();
        if (at !== null) this.set((Date.now() - at) / 1000);
      },
    });
    for (const s of NODE_STATUSES) this.status.set({ status: s }, s === "UNKNOWN" ? 1 : 0);
    for (const c of REASON_CODES) {
      this.reason.set({ code: c }, 0);
      this.pending.set({ code: c }, 0);
    }
    for (const s of NODE_STATUSES) this.transitions.inc({ to: s }, 0);
    for (const s of SOURCE_NAMES) this.sourceErrors.inc({ source: s }, 0);
    for (const a of AGENT_CHECK_REPLIES) this.agentCheckReplies.inc({ reply: a }, 0);
  }

  source(name: SourceName, durationMs: number, failed: boolean): void {
    this.sourceDuration.observe({ source: name }, durationMs / 1000);
    if (failed) this.sourceErrors.inc({ source: name });
  }

  probe(latencyMs: number): void {
    this.probeLatency.observe(latencyMs / 1000);
  }

  decision(d: Decision, changed: boolean): void {
    this.lastDecisionAt = Date.now();
    if (changed) this.transitions.inc({ to: d.status });
    this.weight.set(d.weight);
    this.loadScore.set(d.loadScore);
    // The labelled series (a status, two per reason code) are written only when what they show changed:
    // the agent decides several times a second and each labelled write hashes its labels.
    const shown = `${d.status}|${d.reasons.map((x) => x.code).join(",")}|${d.pending.map((x) => x.code).join(",")}`;
    if (shown === this.decisionShown) return;
    this.decisionShown = shown;
    for (const s of NODE_STATUSES) this.status.set({ status: s }, s === d.status ? 1 : 0);
    const active = new Set(d.reasons.map((x) => x.code));
    const pending = new Set(d.pending.map((x) => x.code));
    for (const c of REASON_CODES) {
      this.reason.set({ code: c }, active.has(c) ? 1 : 0);
      this.pending.set({ code: c }, pending.has(c) ? 1 : 0);
    }
  }

  /** The signals the GPU and engine series show (the agent's own object: read when scraped). */
  signals(s: Signals, expected: number | null): void {
    this.shown = { signals: s, expected };
    // A hung or failing nvidia-smi says nothing about the GPUs (the tool broken is not the GPU broken):
    // the series show the last sample that did, nvidia-smi's answer or the driver saying they are gone.
    const k = s.gpu?.value.kind;
    if (k === "ok" || k === "gpu-lost" || k === "driver-not-loaded" || k === "driver-mismatch") this.lastTelling = s.gpu;
  }

  private writeSources(): void {
    if (!this.shown) return;
    const { signals: s, expected } = this.shown;
    this.gpusExpected.set(expected ?? 0);
    // Each sample is written once, at the first scrape that sees it.
    const engine = s.engine;
    if (engine !== this.engineShown) {
      this.engineShown = engine;
      const e = engine?.value;
      if (e) {
        this.engineRunning.set(e.running);
        this.engineWaiting.set(e.waiting);
        if (e.kvCacheUsage !== null) this.engineKv.set(e.kvCacheUsage);
        if (e.corruptedRequests != null) this.engineCorrupted.set(e.corruptedRequests);
      }
    }
    const sample = this.lastTelling;
    if (sample === this.gpuShown) return;
    this.gpuShown = sample;
    const g = sample?.value;
    if (g?.kind === "ok") {
      this.gpus.set(g.gpus.length);
      for (const gpu of g.gpus) {
        const l = { gpu: String(gpu.index) };
        if (gpu.temperatureC !== null) this.gpuTemp.set(l, gpu.temperatureC);
        if (gpu.powerW !== null) this.gpuPower.set(l, gpu.powerW);
        if (gpu.utilizationPct !== null) this.gpuUtil.set(l, gpu.utilizationPct);
        this.gpuEcc.set(l, gpu.eccUncorrectedVolatile ?? 0);
      }
    } else if (g) {
      this.gpus.set(0);
    }
  }
}
