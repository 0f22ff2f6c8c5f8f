import type { InferenceKind } from "../../config/spec";
import { isFail, type HttpAnswer, type Send } from "./inference";
import type { Signals } from "./signals";

/**
 * The server's model list (`/v1/models`; TGI's `/info`), kept from check to check while nothing
 * says it may have changed. A server changes what it serves by restarting, and a restart shows
 * first in its health answer, in the watch connection the kernel closes, or in a refused probe:
 * the agent forgets the list on each of those (`forget`), and the next check reads it again.
 * Kept at most `maxAgeMs` in any case. Only for the kinds whose check asks the server's health
 * first; a generic OpenAI server's check is the list itself, and Triton's asks per model. While a
 * probe answers every period the check needs no request at all (`answeredWithin`). The health and the
 * list were read every second before: half the agent's requests.
 */
export const MODEL_LIST_MAX_AGE_MS = 10_000;

const KEPT_KINDS: ReadonlySet<InferenceKind> = new Set(["vllm", "llamacpp", "tgi"]);
const LIST_PATHS = ["/v1/models", "/info"] as const;

export class ModelListCache {
  private kept: { url: string; at: number; answer: HttpAnswer } | null = null;

  constructor(
    private readonly kind: InferenceKind,
    private readonly maxAgeMs = MODEL_LIST_MAX_AGE_MS,
    private readonly clock: () => number = Date.now,
  ) {}

  /** `send`, with the model list answered from the kept one while it is fresh. */
  wrap(send: Send): Send {
    if (!KEPT_KINDS.has(this.kind)) return send;
    return async (url, timeoutMs, body, signal, auth) => {
      if (body !== undefined || !LIST_PATHS.some((p) => url.endsWith(p))) return send(url, timeoutMs, body, signal, auth);
      const k = this.kept;
      if (k && k.url === url && this.clock() - k.at < this.maxAgeMs) return k.answer;
      const r = await send(url, timeoutMs, body, signal, auth);
      this.kept = !isFail(r) && r.status === 200 ? { url, at: this.clock(), answer: r } : null;
      return r;
    };
  }

  /**
   * Whether this period's check can stand on what the agent already knows: the last check found the
   * server ready, the list is kept, and a probe answered within the period. A completion answered is
   * more than the health answer says (vLLM's, TGI's and llama.cpp's health fail whenever completions
   * do); a probe that fails forgets the list, so the next check asks again at once.
   */
  answeredWithin(signals: Signals, now: number, periodMs: number): boolean {
    const p = signals.probe;
    return this.kept !== null && now - this.kept.at < this.maxAgeMs && signals.model?.value.kind === "ready" && p?.value.kind === "ok" && now - p.at < periodMs;
  }

  /** The server may have changed: the next check reads the list again. */
  forget(): void {
    this.kept = null;
  }
}
