/**
 * The deep check's runtime (the logic is pure, in `deep-check.ts`): begins a check when the agent
 * starts and again when the inference server is ready after a restart, runs `dcgmi diag -r 1`
 * (agent start only; a failed or unrunnable diag again at most every `LLMHA_DEEP_CHECK_RETRY_MS`),
 * asks the canary runner for a round as soon as the server is ready (and again after a round that
 * did not pass), and gives the evaluator the reason to carry. Publishes
 * `llmha_deep_check_total{result}` and `llmha_deep_check_seconds`; logs a check's start, pass and failure.
 */
import { Counter, Histogram, type Registry } from "../util/prom";
import type { Reason } from "../types";
import type { Logger } from "../util/log";
import { beginCheck, canaryRoundSeen, deepCheckReason, deepCheckVerdict, observeSmoke, type CanaryRoundResult, type DeepCheckMode, type DeepCheckState, type DeepCheckVerdict, type DiagPart, type SmokeSettings } from "./deep-check";
import { describeFailures, findExecutable, runDiag, type DiagResult } from "./sources/dcgmi";
import type { Signals } from "./sources/signals";

export interface DeepCheckOptions {
  mode: DeepCheckMode;
  dcgmi: string;
  timeoutMs: number;
  retryMs: number;
  /** Least time between two canary rounds the check asks for. */
  canaryRetryMs: number;
  settings: Omit<SmokeSettings, "engineWanted">;
  /** `LLMHA_METRICS_URL` was set: the engine must answer; else only once it has answered in this agent's life. */
  engineConfigured: boolean;
  log: Logger;
  registry: Registry;
  /** Called when a result arrives outside an evaluation (the diag's end): evaluate now. */
  onChange: () => void;
  clock?: () => number;
  /** Runs the diag; tests may give their own. */
  diag?: (path: string, timeoutMs: number) => Promise<DiagResult>;
  /** Looks dcgmi up; default `findExecutable` on PATH. */
  find?: (name: string) => string | null;
}

export class DeepCheck {
  private st: DeepCheckState | null = null;
  private verdict: DeepCheckVerdict | null = null;
  private readonly dcgmiPath: string | null;
  private readonly clock: () => number;
  private askCanary: (() => void) | null = null;
  private lastAsk: number | null = null;
  private engineSeen = false;
  private diagRunning = false;
  private readonly total: Counter;
  private readonly seconds: Histogram;

  constructor(private readonly o: DeepCheckOptions) {
    this.clock = o.clock ?? Date.now;
    this.dcgmiPath = o.mode === "auto" || o.mode === "dcgmi" ? (o.find ?? findExecutable)(o.dcgmi) : null;
    const r = [o.registry];
    this.total = new Counter({ name: "llmha_deep_check_total", help: "Deep checks before traffic that passed, and failures seen (a failed dcgmi diag, a canary round that did not pass)", labelNames: ["result"], registers: r });
    this.seconds = new Histogram({ name: "llmha_deep_check_seconds", help: "Time from a deep check's start to its pass", buckets: [1, 2, 5, 10, 20, 30, 60, 120, 300, 600], registers: r });
    for (const result of ["passed", "failed"]) this.total.inc({ result }, 0);
  }

  get enabled(): boolean {
    return this.o.mode !== "off";
  }

  /** The canary runner's way to run a round now; without one the check passes on the smoke alone. */
  attachCanary(ask: () => void): void {
    this.askCanary = ask;
  }

  /** The agent started (a boot, a wake, a reboot): the full check, with dcgmi where used. */
  start(signals: Signals): void {
    if (!this.enabled) return;
    const now = this.clock();
    let diag: DiagPart;
    if (this.dcgmiPath) diag = { kind: "running", since: now };
    else if (this.o.mode === "dcgmi") diag = { kind: "failed", detail: `${this.o.dcgmi} not found or not executable`, hard: false, at: now };
    else diag = { kind: "none", note: this.o.mode === "smoke" ? "dcgmi not used (LLMHA_DEEP_CHECK=smoke)" : `no ${this.o.dcgmi} here: smoke and canary only` };
    this.begin(beginCheck("agent start", now, signals, diag, this.askCanary !== null));
    if (this.dcgmiPath) this.runDiag();
  }

  /** The server is ready after not being ready (a restart, the restart rung): smoke and canary again; the diag's part stands. */
  serverStarted(signals: Signals): void {
    if (!this.st) return;
    const now = this.clock();
    // The first readiness after the agent started belongs to the check already under way.
    if (this.st.trigger === "agent start" && this.verdict?.kind !== "passed" && !this.st.clean.includes("model")) return;
    const diag: DiagPart = this.st.diag.kind === "passed" ? { kind: "none", note: "dcgmi diag passed at agent start" } : this.st.diag;
    this.begin(beginCheck("server restart", now, signals, diag, this.askCanary !== null));
  }

  /** A canary round ended. */
  canaryRound(r: CanaryRoundResult): void {
    if (!this.st) return;
    const before = this.st.canary;
    this.st = canaryRoundSeen(this.st, r);
    if (this.st.canary.kind === "waiting" && this.st.canary.lastFailure && this.st.canary !== before) {
      this.total.inc({ result: "failed" });
      this.o.log.warn({ event: "deep-check", result: "failed", part: "canary", detail: this.st.canary.lastFailure }, `deep check: canary round did not pass (${this.st.canary.lastFailure}); next round in ${this.o.canaryRetryMs} ms`);
    }
    this.o.onChange();
  }

  /** On every evaluation: looks at the signals and returns the reason the decision carries (null: passed or off). */
  step(signals: Signals): Reason | null {
    if (!this.st) return null;
    const now = this.clock();
    if (signals.engine?.value) this.engineSeen = true;
    this.st = observeSmoke(this.st, signals, this.o.settings);
    const d = this.st.diag;
    if (d.kind === "failed" && this.dcgmiPath && !this.diagRunning && now - d.at >= this.o.retryMs) this.runDiag();
    if (this.st.canary.kind === "waiting" && signals.model?.value.kind === "ready" && this.askCanary && (this.lastAsk === null || this.lastAsk < this.st.canary.since || now - this.lastAsk >= this.o.canaryRetryMs)) {
      this.lastAsk = now;
      this.askCanary();
    }
    const v = deepCheckVerdict(this.st, { engineWanted: this.o.engineConfigured || this.engineSeen });
    if (v.kind === "passed" && this.verdict?.kind !== "passed") {
      const ms = now - this.st.startedAt;
      this.total.inc({ result: "passed" });
      this.seconds.observe(ms / 1000);
      this.o.log.info({ event: "deep-check", result: "passed", trigger: this.st.trigger, ms, notes: v.notes }, `deep check (${this.st.trigger}) passed in ${ms} ms: ${v.notes.join("; ")}`);
    }
    this.verdict = v;
    return deepCheckReason(v, this.st);
  }

  /** For `/status`. */
  view(): { state: string; trigger: string; startedAt: number; detail: string } | null {
    if (!this.st || !this.verdict) return null;
    const r = deepCheckReason(this.verdict, this.st);
    return { state: this.verdict.kind, trigger: this.st.trigger, startedAt: this.st.startedAt, detail: r?.detail ?? (this.verdict.kind === "passed" ? this.verdict.notes.join("; ") : "") };
  }

  private begin(st: DeepCheckState): void {
    this.st = st;
    this.verdict = null;
    const dcgmi = st.diag.kind === "running" ? `dcgmi diag -r 1 (${this.dcgmiPath}), ` : "";
    this.o.log.info({ event: "deep-check", result: "begun", trigger: st.trigger }, `deep check (${st.trigger}) begun: ${dcgmi}smoke${st.canary.kind === "off" ? "" : ", canary round"}; the node stays out of rotation until it passes`);
  }

  private runDiag(): void {
    const path = this.dcgmiPath;
    if (!path || this.diagRunning || !this.st) return;
    this.diagRunning = true;
    const t0 = this.clock();
    this.st = { ...this.st, diag: { kind: "running", since: t0 } };
    void (this.o.diag ?? runDiag)(path, this.o.timeoutMs).then((r) => {
      this.diagRunning = false;
      if (!this.st) return;
      const now = this.clock();
      const retry = `next try in ${Math.round(this.o.retryMs / 1000)} s`;
      let diag: DiagPart;
      if (r.kind === "passed") diag = { kind: "passed" };
      else if (r.kind === "failed") diag = { kind: "failed", detail: describeFailures(r.failures), hard: true, at: now };
      // Where dcgmi is only used when present, a diag that cannot run (no host engine) does not keep the node out.
      else if (this.o.mode === "auto") diag = { kind: "none", note: `dcgmi diag could not run (${r.detail}): smoke and canary only` };
      else diag = { kind: "failed", detail: `${r.detail}; ${retry}`, hard: false, at: now };
      this.st = { ...this.st, diag };
      if (r.kind === "passed") this.o.log.info({ event: "deep-check", part: "dcgmi", ms: now - t0 }, `dcgmi diag -r 1 passed in ${now - t0} ms (${r.tests} tests)`);
      else {
        if (diag.kind === "failed") this.total.inc({ result: "failed" });
        const what = r.kind === "failed" ? describeFailures(r.failures) : r.detail;
        this.o.log.warn({ event: "deep-check", result: diag.kind === "failed" ? "failed" : "skipped", part: "dcgmi", detail: what }, `deep check: dcgmi diag -r 1 ${r.kind === "failed" ? "failed" : "could not run"}: ${what}${diag.kind === "failed" ? `; ${retry}` : "; going on without it"}`);
      }
      this.o.onChange();
    });
  }
}
