import { EventEmitter } from "node:events";
import type { AgentConfig } from "../config/spec";
import { DEFAULT_WARMUP_STEPS, evaluate, initialState, type EvaluatorSettings, type EvaluatorState } from "./evaluator/evaluate";
import { expectedRevisions } from "./evaluator/rules";
import type { AgentMetrics, SourceName } from "./reporters/metrics";
import { readPciGpus, type GpuReader } from "./sources/gpu";
import { openGpuReader } from "./sources/gpu-stream";
import { InferenceCredential, splitUserinfo } from "./sources/credential";
import { defaultMetricsUrl, ENGINE_LOOK_MS, EngineActivity, enginePeriodMs, EngineReader } from "./sources/engine-metrics";
import { ADAPTERS, probeOutcome, type InferenceAdapter, type Send } from "./sources/inference";
import { MODEL_LIST_MAX_AGE_MS, ModelListCache } from "./sources/model-list";
import { KeptAlive } from "./sources/kept-alive";
import type { EngineObservation, GpuInfo, ModelIdentity, ProbeObservation, Sample, Signals } from "./sources/signals";
import { servedBy } from "./sources/served-model";
import { ConnectionWatch } from "./sources/watch";
import { DrainFile } from "./sources/drain-file";
import { XidSource } from "./sources/xid-source";
import { takesTraffic, type Decision, type Reason } from "../types";
import type { Logger } from "../util/log";
import { Loop } from "../util/loop";
import { DeepCheck } from "./deep-check-runner";
import { PerfTracker } from "./perf";

/**
 * The node agent's runtime: sources on their own loops (one failing never stops the
 * others), the pure evaluator run on every new result and every period, and the
 * current decision for the reporters. Emits `decision` (Decision, changed) after each
 * evaluation, `engine` (the engine's metrics, null when unread) after each read of them, and
 * `serverStart` when the inference server became ready after not being ready (or at first sight).
 */
export class Agent extends EventEmitter<{ decision: [Decision, boolean]; engine: [EngineObservation | null]; serverStart: [] }> {
  readonly signals: Signals = { fatalXids: [], probeLatencies: [], probeInFlightSince: null };
  private state: EvaluatorState;
  private readonly settings: EvaluatorSettings;
  private readonly adapter: InferenceAdapter;
  private readonly gpu: GpuReader;
  private readonly xid: XidSource | null;
  private readonly engineReader: EngineReader | null;
  private engineLoop: Loop | null = null;
  private readonly engineActivity = new EngineActivity();
  /** What each PCI device folder is (GPU or not), from read to read: see `readPciGpus`. */
  private readonly pciKnown = new Map<string, boolean>();
  /** `LLMHA_INFERENCE_URL` without its user part: what requests go to and what reasons may show. */
  private readonly inferenceBase: string;
  private readonly credential: InferenceCredential;
  private readonly probeExpect: RegExp | null;
  private servedIdentity: ModelIdentity | null = null;
  private lastGoodGpus: GpuInfo[] = [];
  private readonly loops: Loop[] = [];
  private readonly watch: ConnectionWatch;
  private readonly modelLoop: Loop;
  private seq = 0;
  private draining = false;
  private readonly drainFile: DrainFile | null;
  private suspects: ReadonlySet<string> = new Set();
  private probeAbort: AbortController | null = null;
  private probeTimers: NodeJS.Timeout[] = [];
  /** The model check's and the probe's own kept-alive connections (they overlap: one each). */
  private readonly modelHttp = new KeptAlive();
  /** The model list between checks (model-list.ts), and the model check's requests through it. */
  private readonly modelList: ModelListCache;
  private readonly modelSend: Send;
  private readonly probeHttp = new KeptAlive();
  private servedModel: string | null = null;
  /** Times the inference server became ready after not being ready: a restart the canaries wait for. */
  serverStarts = 0;
  private failingSince: number | null = null;
  lastEvaluationAt = 0;
  /** The deep check before traffic (deep-check.ts): the node joins rotation only once it passes. */
  readonly deepCheck: DeepCheck;
  /** What a rollout's gates read of this node (`perf` in its record): probe window per revision, load time, corruption, continuation. */
  readonly perf: PerfTracker;
  /** Reads the fleet's allowed revisions now (rollout-side.ts): asked before a newly served revision is judged. */
  revisionRefresh: (() => Promise<unknown>) | null = null;
  private refreshedFor: string | null = null;

  constructor(
    readonly cfg: AgentConfig,
    private readonly log: Logger,
    private readonly metrics: AgentMetrics,
    private readonly clock: () => number = Date.now,
  ) {
    super();
    this.state = initialState(clock());
    this.settings = {
      gpuCount: cfg.gpuCount, model: cfg.model, probeLatencyMs: cfg.probeLatencyMs, wedgeMs: cfg.wedgeMs, probeStuckMs: cfg.probeStuckMs, modelRevision: cfg.modelRevision,
      fall: cfg.fall, rise: cfg.rise, warmupStepMs: cfg.warmupStepMs, warmupSteps: DEFAULT_WARMUP_STEPS, degradedWeight: cfg.degradedWeight,
    };
    this.perf = new PerfTracker(cfg.probeWindow);
    this.adapter = ADAPTERS[cfg.inferenceKind];
    this.modelList = new ModelListCache(cfg.inferenceKind, MODEL_LIST_MAX_AGE_MS, clock);
    this.modelSend = this.modelList.wrap(this.modelHttp.send);
    this.gpu = openGpuReader(cfg, (event, detail) => log.warn({ event }, detail));
    this.xid = cfg.xidLog ? new XidSource(cfg.xidLog, cfg.xidRules, log) : null;
    this.drainFile = cfg.drainFile ? new DrainFile(cfg.drainFile, cfg.intervalMs, clock, log) : null;
    const target = splitUserinfo(cfg.inferenceUrl);
    this.inferenceBase = target.url;
    this.credential = new InferenceCredential(cfg.inferenceApiKeyFile, target.basic, log);
    const metricsUrl = cfg.metricsUrl ?? defaultMetricsUrl(cfg.inferenceKind, this.inferenceBase);
    this.engineReader = metricsUrl ? new EngineReader(metricsUrl) : null;
    this.probeExpect = cfg.probeExpect ? new RegExp(cfg.probeExpect) : null;
    const u = new URL(cfg.inferenceUrl);
    const port = Number(u.port || (u.protocol === "https:" ? 443 : 80));
    this.modelLoop = this.loop("model", () => this.checkModel());
    this.watch = new ConnectionWatch(u.hostname, port, Math.min(cfg.intervalMs, 500), () => this.serverMayHaveChanged());
    this.deepCheck = new DeepCheck({
      mode: cfg.deepCheck, dcgmi: cfg.dcgmi, timeoutMs: cfg.deepCheckTimeoutMs, retryMs: cfg.deepCheckRetryMs,
      canaryRetryMs: Math.max(1000, Math.min(cfg.canaryIntervalMs || 5000, 5000)),
      settings: this.settings, engineConfigured: cfg.metricsUrl !== null, log, registry: metrics.registry, onChange: () => this.evaluateNow(), clock,
    });
  }

  get decision(): Decision {
    return this.state.decision;
  }

  /**
   * The node's GPUs as last seen. While a failed query has not yet been acted on (the node
   * still takes traffic), the last good list stands: the heartbeat must not tell the
   * controller "0 GPUs" while agent-check still tells HAProxy `up`.
   */
  get gpus(): GpuInfo[] {
    const g = this.signals.gpu?.value;
    if (g?.kind === "ok") return g.gpus;
    return takesTraffic(this.state.decision) ? this.lastGoodGpus : [];
  }

  /** The inference server's credentials as the probe sends them (the canaries send them too). */
  authHeaders(): ReturnType<InferenceCredential["headers"]> {
    return this.credential.headers();
  }

  get model(): string | null {
    return this.servedModel;
  }

  /** What the server says about the model it serves (revision, dtype, context), where its API tells. */
  get modelIdentity(): ModelIdentity | null {
    return this.servedIdentity;
  }

  /** SIGTERM, or the drain file as the last evaluation read it (agent-check, `/readyz` and the decision agree). */
  get isDraining(): boolean {
    return this.draining || (this.drainFile?.seen ?? false);
  }

  /** The canaries' verdict: a mismatch's detail takes the node out (`CANARY_MISMATCH`), null lets it serve. */
  setCanaryMismatch(detail: string | null): void {
    if ((this.signals.canaryMismatch ?? null) === detail) return;
    this.signals.canaryMismatch = detail;
    this.evaluateNow();
  }

  /** The revisions the fleet's rollout allows now (null: the configured `LLMHA_MODEL_REVISION`), checked from the next evaluation on. */
  setAllowedRevisions(allowed: readonly string[] | null): void {
    if ((allowed ?? []).join(",") === (this.settings.allowedRevisions ?? []).join(",")) return;
    this.settings.allowedRevisions = allowed;
    this.evaluateNow();
  }

  /** Soft-fault codes the controller marked suspect (blast-radius cap). */
  setSuspects(codes: ReadonlySet<string>): void {
    this.suspects = codes;
  }

  start(): void {
    const i = this.cfg.intervalMs;
    // A stream waits for its next batch by itself (period 0: read again as soon as a read returns).
    this.loops.push(this.loop("gpu", () => this.checkGpu(), this.gpu.paces ? 0 : i), this.modelLoop, this.loop("probe", () => this.runProbe()));
    // Fast only while the engine serves others or holds the probe (enginePeriodMs): an idle engine read five times a second was the agent's largest cost.
    const period = (): number => enginePeriodMs(this.signals, this.engineActivity.busy, this.cfg.engineIntervalMs, this.cfg.engineIdleIntervalMs, this.clock());
    this.engineLoop = this.engineReader ? this.loop("engine", () => this.checkEngine(), period) : null;
    if (this.engineLoop) this.loops.push(this.engineLoop);
    if (this.xid) this.loops.push(this.loop("xid", async () => this.checkXid()));
    // The clock's own evaluation, for when no source has reported for a period (each source's result is evaluated as it comes).
    const tick = async (): Promise<void> => void (this.clock() - this.lastEvaluationAt >= i && this.evaluateNow());
    this.loops.push(new Loop(i, tick, (e) => this.log.error({ err: e }, "evaluation failed"), true));
    this.deepCheck.start(this.signals);
    for (const l of this.loops) l.start();
    this.watch.start();
  }

  /** SIGTERM: answer `drain` / 503 from now on. */
  drain(): void {
    if (this.draining) return;
    this.draining = true;
    this.log.info({ event: "draining" }, "draining: HAProxy gets drain, /readyz 503");
    this.evaluateNow();
  }

  stop(): void {
    for (const l of this.loops) l.stop();
    this.gpu.stop(); // the nvidia-smi stream, a child of the agent, ends with it
    this.engineReader?.close();
    this.modelHttp.close();
    this.probeHttp.close();
    this.watch.stop();
    this.probeAbort?.abort();
    for (const t of this.probeTimers) clearTimeout(t);
    this.xid?.close();
  }

  private loop(name: SourceName, task: () => Promise<void>, periodMs: number | (() => number) = this.cfg.intervalMs): Loop {
    return new Loop(
      periodMs,
      task,
      (err) => {
        this.metrics.source(name, 0, true);
        this.log.error({ err, source: name }, "source failed unexpectedly");
      },
      true,
    );
  }

  private sample<T>(value: T): Sample<T> {
    return { seq: ++this.seq, at: this.clock(), value };
  }

  private async checkGpu(): Promise<void> {
    const t0 = performance.now();
    const obs = await this.gpu.read();
    if (obs.kind === "ok") this.lastGoodGpus = obs.gpus;
    if (this.cfg.pciDevices) this.signals.pci = this.sample(readPciGpus(this.cfg.pciDevices, this.pciKnown));
    this.metrics.source("gpu", performance.now() - t0, obs.kind !== "ok");
    this.signals.gpu = this.sample(obs);
    this.metrics.signals(this.signals, this.cfg.gpuCount);
    this.evaluateNow();
  }

  private async checkModel(): Promise<void> {
    const last = this.signals.model;
    if (last && this.modelList.answeredWithin(this.signals, this.clock(), this.cfg.intervalMs)) {
      this.signals.model = this.sample(last.value);
      return this.evaluateNow();
    }
    const t0 = performance.now();
    const obs = await this.adapter.check(this.inferenceBase, this.cfg.model, this.cfg.modelTimeoutMs, this.credential.headers(), this.modelSend);
    this.metrics.source("model", performance.now() - t0, obs.kind !== "ready");
    this.perf.model(obs.kind === "ready", this.clock());
    const started = obs.kind === "ready" && this.signals.model?.value.kind !== "ready";
    if (started) {
      this.serverStarts += 1;
      this.deepCheck.serverStarted(this.signals);
    }
    const served = obs.kind === "ready" ? servedBy(obs, this.cfg.model) : null;
    if (served) {
      this.servedModel = served.probeModel;
      const identity = served.identity;
      if (JSON.stringify(identity) !== JSON.stringify(this.servedIdentity)) this.log.info({ event: "model", ...identity }, `serving ${identity?.id ?? "nothing"}`);
      this.servedIdentity = identity;
    }
    // A revision the check would refuse may be the fleet's rollout's other one: read what it allows now,
    // once per revision, rather than take the node out until the next periodic read.
    const rev = served ? (this.servedIdentity?.revision ?? null) : null;
    const want = expectedRevisions(this.settings);
    if (rev !== null && want.length > 0 && !want.includes(rev) && rev !== this.refreshedFor && this.revisionRefresh) await this.revisionRefresh().catch(() => undefined);
    this.refreshedFor = rev;
    this.signals.model = this.sample(obs);
    if (!served) {
      this.modelList.forget();
      this.resetProbe();
    } else if (!served.configuredServed) {
      // Out for MODEL_MISSING: read the list every period, not once in `MODEL_LIST_MAX_AGE_MS`. The probe
      // answers again as soon as the model is back, and kept the old list in use: 10 s more out.
      this.modelList.forget();
    }
    this.evaluateNow();
    if (started) this.emit("serverStart");
  }

  private async checkEngine(): Promise<void> {
    const t0 = performance.now();
    const e = this.engineReader ? await this.engineReader.read(this.cfg.modelTimeoutMs, this.credential.headers()) : null;
    this.metrics.source("engine", performance.now() - t0, e === null);
    this.engineActivity.update(e, this.cfg.probeMaxTokens + 64);
    this.signals.engine = this.sample(e);
    this.metrics.signals(this.signals, this.cfg.gpuCount);
    this.evaluateNow();
    this.emit("engine", e);
  }

  private async checkXid(): Promise<void> {
    const r = this.xid?.check(this.signals, this.clock()) ?? false;
    if (r === "failed") this.metrics.source("xid", 0, true);
    else if (r) this.evaluateNow();
  }

  private resetProbe(): void {
    this.probeAbort?.abort();
    this.probeAbort = null;
    for (const t of this.probeTimers) clearTimeout(t);
    this.probeTimers = [];
    this.signals.probe = undefined;
    this.signals.probeInFlightSince = null;
    this.signals.probeUnansweredSince = null;
  }

  /**
   * One probe at a time; a probe still running past the threshold is reported as over it —
   * at the threshold and then every `period / fall` while it runs, so `fall` results are in
   * within one period after the threshold is passed (latency creep acts within one period).
   */
  private async runProbe(): Promise<void> {
    if (this.signals.probeInFlightSince != null) return;
    // A draining server is being stopped on purpose: its preStop hook waits until it holds no
    // request, and the agent's own probes kept it busy most of the time (a 3 s drain took 25 s).
    if (this.isDraining) return;
    if (this.signals.model?.value.kind !== "ready") return;
    const req = this.adapter.probe(this.inferenceBase, this.servedModel, this.cfg.probeMaxTokens, this.cfg.probePrompt);
    if (!req) return;
    const abort = new AbortController();
    this.probeAbort = abort;
    const started = this.clock();
    this.signals.probeInFlightSince = started;
    const unansweredSince = (this.signals.probeUnansweredSince ??= started);
    const at = (ms: number, fn: () => void): void => {
      const t = setTimeout(fn, ms);
      t.unref?.();
      this.probeTimers.push(t);
    };
    // Act within one period of the threshold being passed, not when the probe returns.
    const step = Math.max(50, Math.floor(this.cfg.intervalMs / this.cfg.fall));
    const overdue = (): void => {
      this.setProbe({ kind: "in-flight", elapsedMs: this.clock() - started });
      at(step, overdue);
    };
    at(this.cfg.probeLatencyMs, overdue);
    if (this.engineLoop) at(ENGINE_LOOK_MS, () => this.engineLoop?.kick());
    // The stuck bound (counted from the first probe of an unanswered run) acts when it is passed, not at the next period.
    const stuckIn = this.cfg.probeStuckMs - (started - unansweredSince);
    if (stuckIn < this.cfg.probeTimeoutMs) at(Math.max(0, stuckIn), () => this.evaluateNow());
    void (async () => {
      const r = await this.probeHttp.send(req.url, this.cfg.probeTimeoutMs, req.body, abort.signal, this.credential.headers());
      if (abort.signal.aborted) return;
      for (const t of this.probeTimers) clearTimeout(t);
      this.probeTimers = [];
      this.probeAbort = null;
      this.signals.probeInFlightSince = null;
      const elapsed = this.clock() - started;
      const obs = probeOutcome(req, r, elapsed, this.probeExpect);
      this.engineActivity.probeAnswered();
      if (obs.kind === "ok") {
        this.metrics.probe(elapsed);
        this.signals.probeLatencies = [...(this.signals.probeLatencies ?? []), elapsed].slice(-this.cfg.probeWindow);
      }
      // Any answer — even an error — ends an unanswered run; a timeout continues it.
      if (obs.kind !== "timeout") this.signals.probeUnansweredSince = null;
      this.perf.probe(this.servedIdentity?.revision ?? "", obs.kind === "ok", obs.kind === "ok" ? elapsed : null);
      this.metrics.source("probe", elapsed, obs.kind !== "ok");
      this.setProbe(obs);
      // A refused probe (a model gone, a server restarted under it): the model check looks again now.
      if (obs.kind === "failed") this.serverMayHaveChanged();
    })();
  }

  /** The watch connection closed, or a probe was refused: read the model list afresh, now. */
  private serverMayHaveChanged(): void {
    this.modelList.forget();
    this.modelLoop.kick();
  }

  private setProbe(obs: ProbeObservation): void {
    this.signals.probe = this.sample(obs);
    this.evaluateNow();
  }

  /** Runs the evaluator on the current signals; logs and counts only changes. */
  evaluateNow(): void {
    const now = this.clock();
    const prev = this.state.decision;
    this.signals.deepCheck = this.deepCheck.step(this.signals);
    let next = evaluate(this.signals, this.state, now, this.settings, this.suspects);
    const planned = this.drainFile?.present() ?? false;
    if (this.draining || planned) {
      const r: Reason = this.draining
        ? { source: "agent", code: "AGENT_DRAINING", hard: true, effect: "unknown", detail: "agent is shutting down" }
        : { source: "agent", code: "PLANNED_DRAIN", hard: true, effect: "unknown", detail: `${this.cfg.drainFile} present: the inference server is being stopped on purpose` };
      next = { ...next, decision: { ...next.decision, phase: "draining", weight: 0, reasons: [r, ...next.decision.reasons] } };
    }
    this.state = next;
    this.lastEvaluationAt = now;
    const d = next.decision;
    const changed = d.status !== prev.status || d.phase !== prev.phase;
    const anyFailing = d.pending.length > 0 || d.reasons.some((r) => r.source !== "agent");
    if (anyFailing && this.failingSince === null) this.failingSince = now;
    if (changed) {
      const out = d.phase === "down" || d.phase === "loading";
      if (out && this.failingSince !== null) this.metrics.lastDetection.set((now - this.failingSince) / 1000);
      this.log.info(
        { event: "transition", from: prev.status, to: d.status, phase: d.phase, weight: d.weight, reasons: d.reasons.map((r) => r.code), detail: d.reasons[0]?.detail },
        `${prev.status} -> ${d.status} (${d.phase}${d.reasons.length ? ": " + d.reasons.map((r) => r.code).join(", ") : ""})`,
      );
    } else if (d.weight !== prev.weight) {
      this.log.debug({ event: "weight", weight: d.weight }, `weight ${prev.weight}% -> ${d.weight}%`);
    }
    if (!anyFailing) this.failingSince = null;
    this.metrics.decision(d, changed);
    this.emit("decision", d, changed);
  }
}
