/**
 * The continuation check: does this node's server still take the request the edge's relay sends
 * to resume a cut stream? An engine upgrade can drop `continue_final_message` (or change the chat
 * template so an open assistant turn is refused): every stream cut on such a node then ends in an
 * error for its client instead of carrying on. A rollout gates on it (`NodePerf.continuation`).
 *
 * The request is built by the relay's own shape (`continuationRequest` in contracts/continuation.ts)
 * from a short greedy chat request and a made-up delivered prefix, so the check sends exactly what
 * the relay would: the chat body, the delivered text as a final assistant message, the kind's
 * continuation fields, `max_tokens` less what was delivered, streamed. Kinds that cannot continue
 * a chat (contracts/continuation.ts `restart`) get the greedy seeded request the relay re-runs;
 * Triton's KServe port has no chat route at all: not checked there (null).
 *
 * Outcomes: `ok` (200 and at least one token streamed), `refused` (a 4xx other than auth and
 * rate limits: the engine does not take the shape), `error` (anything else: no answer, 5xx, 200
 * without tokens). A refusal is the engine's rule and counts at once; an error is reported only
 * when the check run again `confirmMs` later (default 5 s) errs too, since a rollout's gate rolls
 * back on it and one timed-out request on a busy server is no reason to. One request at a time, a
 * few tokens, at most once a period (default a minute) plus once after each server start (the new
 * server's answer is what counts) and the confirmations.
 */
import type { InferenceKind } from "../config/spec";
import type { NodePerf } from "../fleet/rollout/types";
import { continuationRequest, type ContinuationBody as Body } from "../../../contracts/continuation";
import type { Logger } from "../util/log";
import { Loop } from "../util/loop";
import { CANARY_SEED } from "./canary/answers";
import { request, type AuthHeaders } from "./sources/inference";

export type ContinuationResult = NonNullable<NodePerf["continuation"]>;

/** The question, and the part of its answer a client "had" when its stream was cut. */
const QUESTION = "Name the capital of Australia in one sentence.";
const DELIVERED = "The capital of Australia is";
/** The tokens that prefix counts as (the relay counts chunks: one token a chunk). */
const DELIVERED_TOKENS = 5;

/** Default least time between checks (the per-start check comes on top). */
export const CONTINUATION_CHECK_PERIOD_MS = 60_000;

/** The resume request the relay would send for a chat stream cut after `DELIVERED`; null where the kind has no chat route to check. */
export function continuationCheckRequest(kind: InferenceKind, base: string, model: string, maxTokens: number): { url: string; body: Body } | null {
  if (kind === "triton") return null;
  const first: Body = { model, messages: [{ role: "user", content: QUESTION }], max_tokens: maxTokens + DELIVERED_TOKENS, temperature: 0, seed: CANARY_SEED, stream: true };
  const plan = continuationRequest("chat", kind, first, { text: DELIVERED, tokens: DELIVERED_TOKENS });
  return plan ? { url: `${base}/v1/chat/completions`, body: plan.body } : null;
}

/** Tokens in a streamed chat answer (`data:` chunks whose delta has text), or 1 for a whole non-empty one (a server that ignored `stream`). */
function tokensIn(text: string): number {
  const content = (v: unknown): unknown => {
    const c = (v as { choices?: { delta?: { content?: unknown }; message?: { content?: unknown } }[] } | null)?.choices?.[0];
    return c?.delta?.content ?? c?.message?.content;
  };
  let n = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    try {
      const c = content(JSON.parse(line.slice(5)));
      if (typeof c === "string" && c.length > 0) n++;
    } catch {
      // `[DONE]`, or a line that is not JSON: no token.
    }
  }
  if (n > 0) return n;
  try {
    const c = content(JSON.parse(text));
    return typeof c === "string" && c.length > 0 ? 1 : 0;
  } catch {
    return 0;
  }
}

/** The outcome of one check from the server's answer (or the request's failure). */
export function classifyContinuation(r: { status: number; text: string } | { kind: string; detail: string }): { outcome: ContinuationResult; detail: string } {
  if ("kind" in r) return { outcome: "error", detail: r.detail };
  if (r.status === 200) {
    const n = tokensIn(r.text);
    return n > 0 ? { outcome: "ok", detail: `200, ${n} token${n === 1 ? "" : "s"}` } : { outcome: "error", detail: "200 without tokens" };
  }
  // Auth, timeouts and rate limits say nothing about the shape.
  const refused = r.status >= 400 && r.status < 500 && ![401, 403, 408, 429].includes(r.status);
  return { outcome: refused ? "refused" : "error", detail: `${r.status}: ${r.text.replace(/\s+/g, " ").slice(0, 160)}` };
}

export interface ContinuationCheckOptions {
  kind: InferenceKind;
  baseUrl: string;
  /** The model id to ask for (null while none is served). */
  model(): string | null;
  ready(): boolean;
  auth(): AuthHeaders;
  log: Logger;
  timeoutMs: number;
  /** Tokens asked for. Default 4. */
  maxTokens?: number;
  /** Least time between checks. Default `CONTINUATION_CHECK_PERIOD_MS`. */
  periodMs?: number;
  /** How soon an error is checked again before it is reported. Default 5000 ms. */
  confirmMs?: number;
  /** Each check's outcome (null: the server restarted, no check of it yet). */
  onResult(outcome: ContinuationResult | null): void;
}

export class ContinuationCheck {
  private readonly loop: Loop;
  private lastOutcome: ContinuationResult | null = null;
  /** An error seen and not yet confirmed by the next check. */
  private unconfirmed = false;
  private confirm: NodeJS.Timeout | null = null;

  constructor(private readonly o: ContinuationCheckOptions) {
    this.loop = new Loop(o.periodMs ?? CONTINUATION_CHECK_PERIOD_MS, () => this.runOnce().then(() => undefined), (err) => o.log.error({ err, source: "continuation-check" }, "continuation check failed unexpectedly"));
  }

  get last(): ContinuationResult | null {
    return this.lastOutcome;
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
    if (this.confirm) clearTimeout(this.confirm);
  }

  /** The server (re)started: the last result was the old server's; the new one is checked now. */
  serverStarted(): void {
    this.lastOutcome = null;
    this.unconfirmed = false;
    this.o.onResult(null);
    this.loop.kickAfter();
  }

  /** One check (skipped, null, while the server is not ready or the kind has nothing to check). */
  async runOnce(): Promise<ContinuationResult | null> {
    const model = this.o.model();
    if (!model || !this.o.ready()) return null;
    const req = continuationCheckRequest(this.o.kind, this.o.baseUrl, model, this.o.maxTokens ?? 4);
    if (!req) return null;
    const r = await request(req.url, this.o.timeoutMs, req.body, undefined, this.o.auth());
    const { outcome, detail } = classifyContinuation(r);
    if (outcome === "error" && !this.unconfirmed && this.lastOutcome !== "error") {
      // Once is no pattern: checked again soon, reported if it errs again.
      this.unconfirmed = true;
      this.o.log.info({ event: "continuation-check", outcome, detail }, `continuation check error (${detail}); checking again before reporting it`);
      if (this.confirm) clearTimeout(this.confirm);
      this.confirm = setTimeout(() => this.loop.kickAfter(), this.o.confirmMs ?? 5000);
      this.confirm.unref?.();
      return this.lastOutcome;
    }
    this.unconfirmed = false;
    if (outcome !== this.lastOutcome) {
      const level = outcome === "ok" ? "info" : "warn";
      const why = outcome === "refused" ? ": the server refuses the edge's resume request; a stream cut on this node cannot be carried on" : "";
      this.o.log[level]({ event: "continuation-check", from: this.lastOutcome, to: outcome, detail }, `continuation check ${outcome} (${detail})${why}`);
    }
    this.lastOutcome = outcome;
    this.o.onResult(outcome);
    return outcome;
  }
}
