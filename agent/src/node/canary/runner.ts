/**
 * The agent's canary loop: every `LLMHA_CANARY_INTERVAL_MS` one round — the set the
 * decision asks for, one request at a time to the node's own server — then the answers go to
 * Redis (the fleet learns from them), the expectation for the served model is read back, and the
 * pure decision (`decide.ts`) steps. A SUSPECT node's re-check runs at once, not a period later,
 * and so does a round after the engine reported corrupted requests (`corrupted.ts`: at most one
 * per rise, `forcedFloorMs` apart). Cost is bounded (one round a period plus those, 3 short greedy
 * requests, never two rounds at once) and published: `llmha_canary_requests_total`,
 * `llmha_canary_seconds_total`, `llmha_canary_time_share`, `llmha_canary_rounds_total{trigger}`.
 */
import type { Redis } from "ioredis";
import { Counter, Gauge, type Registry } from "../../util/prom";
import type { InferenceKind } from "../../config/spec";
import type { RedisKeys } from "../../fleet/redis/keys";
import { request } from "../sources/inference";
import type { AuthHeaders } from "../sources/inference";
import type { Logger } from "../../util/log";
import { Loop } from "../../util/loop";
import { CANARY_PROMPTS, canaryRequest, compareAnswers, selfCheck, type CanaryAnswer, type CanaryTolerance } from "./answers";
import { corruptedRead, corruptedRoundRan, corruptedTrigger, INITIAL_CORRUPTED_WATCH, type CorruptedWatch } from "./corrupted";
import { CANARY_PHASES, canaryStep, initialCanaryState, type CanaryRound, type CanaryState } from "./decide";
import { publishAnswers, readExpectation } from "./store";
import type { CanaryRoundResult } from "../deep-check";

export interface CanaryOptions {
  kind: InferenceKind;
  baseUrl: string;
  nodeId: string;
  az: string;
  intervalMs: number;
  maxTokens: number;
  timeoutMs: number;
  tolerance: CanaryTolerance;
  /** The model id to ask for and its key (`modelKey`: id@revision …), null while nothing is served. */
  served(): { id: string | null; key: string } | null;
  /** Ready for traffic as the model check last saw it. */
  ready(): boolean;
  /** Times the inference server became ready after not being ready (a restart raises it). */
  serverStarts(): number;
  /** The fleet's Redis; `recordKey`: the node's own record with a node identity (null before it is enrolled), absent without one. */
  fleet(): { redis: Redis; keys: RedisKeys; recordKey?: string | null } | null;
  log: Logger;
  registry: Registry;
  onChange(s: CanaryState): void;
  /** The inference server's credentials (`LLMHA_INFERENCE_API_KEY_FILE`, or the URL's user part), as the probe sends them. */
  auth?: () => AuthHeaders;
  /** Each round's outcome, for the deep check before traffic (its first round must not mismatch). */
  onRound?(r: CanaryRoundResult): void;
  /** Least time between rounds forced by the engine's corrupted-requests counter; default `timeoutMs`. */
  forcedFloorMs?: number;
  clock?: () => number;
}

/** Why a round ran: its period, a SUSPECT node's re-check, the engine reporting corrupted requests, or the deep check before traffic. */
export const CANARY_TRIGGERS = ["interval", "suspect", "engine-corrupted", "deep-check"] as const;
export type CanaryTrigger = (typeof CANARY_TRIGGERS)[number];

export class CanaryRunner {
  private st: CanaryState;
  private readonly loop: Loop;
  private readonly answers: Record<string, CanaryAnswer> = {};
  private readonly requests: Counter;
  private readonly seconds: Counter;
  private readonly share: Gauge;
  private readonly phase: Gauge;
  private readonly rounds: Counter;
  private readonly startedAt: number;
  private spentMs = 0;
  private lastKey: string | null = null;
  private readonly clock: () => number;
  private corrupted: CorruptedWatch = INITIAL_CORRUPTED_WATCH;
  /** What the next round is for when it is not its period: set by a SUSPECT step or a corrupted-requests rise. */
  private trigger: { kind: CanaryTrigger; why: string } | null = null;

  constructor(private readonly o: CanaryOptions) {
    this.clock = o.clock ?? Date.now;
    this.startedAt = this.clock();
    this.st = initialCanaryState(this.startedAt);
    const r = [o.registry];
    this.requests = new Counter({ name: "llmha_canary_requests_total", help: "Canary requests sent to the node's server, by set and result", labelNames: ["set", "result"], registers: r });
    this.seconds = new Counter({ name: "llmha_canary_seconds_total", help: "Time the node's server spent answering canaries", registers: r });
    this.share = new Gauge({ name: "llmha_canary_time_share", help: "Canary request time as a share of wall time since the agent started (one request at a time: an upper bound of the GPU share)", registers: r });
    this.phase = new Gauge({ name: "llmha_canary_phase", help: "1 for the canary decision's current phase (unknown, ok, suspect, mismatch, capped)", labelNames: ["phase"], registers: r });
    this.rounds = new Counter({ name: "llmha_canary_rounds_total", help: "Canary rounds run, by trigger (interval, suspect, engine-corrupted)", labelNames: ["trigger"], registers: r });
    for (const p of CANARY_PHASES) this.phase.set({ phase: p }, p === "unknown" ? 1 : 0);
    for (const t of CANARY_TRIGGERS) this.rounds.inc({ trigger: t }, 0);
    for (const set of ["first", "second"]) for (const result of ["ok", "error"]) this.requests.inc({ set, result }, 0);
    this.loop = new Loop(o.intervalMs, () => this.round(), (err) => o.log.error({ err, source: "canary" }, "canary round failed unexpectedly"));
  }

  get state(): CanaryState {
    return this.st;
  }

  /** What status shows: the phase, the detail, and the cost so far. */
  view(): { phase: string; since: number; detail: string; next: string; timeShare: number } {
    return { phase: this.st.phase, since: this.st.since, detail: this.st.detail, next: this.st.next, timeShare: this.timeShare() };
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
  }

  /**
   * The engine's corrupted-requests counter as just read (null: not exported). A rise since the
   * last round asks for a round at once — through the loop, so never two at once — and nothing
   * else: the round's answers decide, as in any round.
   */
  engineCorrupted(total: number | null): void {
    const r = corruptedRead(this.corrupted, total, this.clock(), this.o.forcedFloorMs ?? this.o.timeoutMs);
    this.corrupted = r.watch;
    if (!r.force) return;
    const why = corruptedTrigger(r.force);
    if (this.trigger?.kind !== "suspect") this.trigger = { kind: "engine-corrupted", why };
    this.o.log.warn({ event: "canary-trigger", trigger: "engine-corrupted", corruptedRequests: r.force.total, rise: r.force.rise, source: "canary" }, `canary round now: ${why}`);
    this.loop.kickAfter();
  }

  /** A round now for the deep check before traffic (the server just became ready): through the loop, never beside another. */
  deepCheckRound(): void {
    if (this.trigger === null) this.trigger = { kind: "deep-check", why: "" };
    this.loop.kickAfter();
  }

  private timeShare(): number {
    const wall = this.clock() - this.startedAt;
    return wall > 0 ? this.spentMs / wall : 0;
  }

  /** One round; exported for tests through `runOnce`. */
  async runOnce(): Promise<CanaryState> {
    await this.round();
    return this.st;
  }

  private async round(): Promise<void> {
    const trigger = this.trigger ?? { kind: "interval" as const, why: "" };
    this.trigger = null;
    const served = this.o.served();
    if (!served || !this.o.ready()) {
      // Nothing checked: a rise still stands, and asks again once the floor is over.
      this.corrupted = { ...this.corrupted, pending: false };
      return;
    }
    this.corrupted = corruptedRoundRan(this.corrupted);
    this.rounds.inc({ trigger: trigger.kind });
    if (served.key !== this.lastKey) {
      // Another model or revision: answers of the old one mean nothing for the new.
      for (const k of Object.keys(this.answers)) delete this.answers[k];
      this.lastKey = served.key;
    }
    const set = this.st.next;
    const startedAt = this.clock();
    const got: Record<string, CanaryAnswer> = {};
    for (const p of CANARY_PROMPTS[set]) {
      const req = canaryRequest(this.o.kind, this.o.baseUrl, served.id, p, this.o.maxTokens);
      if (!req) return;
      const t0 = this.clock();
      const r = await request(req.url, this.o.timeoutMs, req.body, undefined, this.o.auth?.() ?? {});
      const dt = this.clock() - t0;
      this.spentMs += dt;
      this.seconds.inc(dt / 1000);
      const a = "kind" in r || r.status !== 200 ? null : req.parse(r.text);
      this.requests.inc({ set, result: a ? "ok" : "error" });
      // A failed request is the probe's business: the round judges only what was answered.
      if (a) got[p.id] = a;
    }
    this.share.set(this.timeShare());
    Object.assign(this.answers, got);
    const fleet = this.o.fleet();
    let expected: Awaited<ReturnType<typeof readExpectation>> = null;
    if (fleet) {
      try {
        // With a node identity, into its own record (none before it is enrolled).
        if (fleet.recordKey !== null) await publishAnswers(fleet.redis, fleet.keys, { nodeId: this.o.nodeId, az: this.o.az, model: served.key, at: this.clock(), answers: this.answers }, fleet.recordKey ?? undefined);
        expected = await readExpectation(fleet.redis, fleet.keys, served.key);
      } catch (err) {
        this.o.log.warn({ err: (err as Error).message, source: "canary" }, "canary answers not shared with the fleet (Redis)");
      }
    }
    const verdict = judge(got, expected?.answers ?? {}, this.o.tolerance);
    this.step({ set, ...verdict, capped: expected?.capped === true, serverStarts: this.o.serverStarts() }, trigger);
    const againstFleet = Object.keys(got).some((id) => expected?.answers[id] !== undefined);
    this.o.onRound?.({ startedAt, outcome: verdict.outcome, detail: verdict.detail, againstFleet, answered: Object.keys(got).length, model: served.id });
  }

  private step(r: CanaryRound, trigger: { kind: CanaryTrigger; why: string }): void {
    const prev = this.st;
    this.st = canaryStep(prev, r, this.clock());
    const why = trigger.why ? { trigger: trigger.kind, why: trigger.why } : { trigger: trigger.kind };
    if (this.st.phase !== prev.phase) {
      for (const p of CANARY_PHASES) this.phase.set({ phase: p }, p === this.st.phase ? 1 : 0);
      const level = this.st.phase === "ok" ? "info" : "warn";
      this.o.log[level]({ event: "canary", from: prev.phase, to: this.st.phase, set: r.set, detail: this.st.detail, ...why }, `canary ${prev.phase} -> ${this.st.phase}${this.st.detail ? `: ${this.st.detail}` : ""}${trigger.why ? ` (round run because the ${trigger.why})` : ""}`);
      this.o.onChange(this.st);
    } else if (trigger.kind === "engine-corrupted") {
      // The forced round's verdict, whatever it is: the rise alone changes nothing.
      this.o.log.info({ event: "canary", from: prev.phase, to: this.st.phase, set: r.set, outcome: r.outcome, ...why }, `canary round run because the ${trigger.why}: ${r.outcome}, still ${this.st.phase}`);
    }
    // A suspect node is re-checked with the other set at once (after this round, never beside it).
    if (this.st.phase === "suspect") {
      this.trigger = { kind: "suspect", why: "" };
      this.loop.kickAfter();
    }
  }
}

/** A round's outcome: a mismatch names the first prompt that differs; a match needs something judged (an expectation, or logprobs to self-check). */
export function judge(got: Record<string, CanaryAnswer>, expected: Record<string, CanaryAnswer>, tol: CanaryTolerance): Pick<CanaryRound, "outcome" | "detail"> {
  let judged = false;
  for (const [id, a] of Object.entries(got)) {
    const want = expected[id];
    const why = want ? compareAnswers(a, want, tol) : selfCheck(a);
    if (why) return { outcome: "mismatch", detail: `${id}: ${why}` };
    if (want || a.logprobs) judged = true;
  }
  return judged ? { outcome: "match", detail: "" } : { outcome: "none", detail: "" };
}
