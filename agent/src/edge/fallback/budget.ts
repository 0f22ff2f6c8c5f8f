/**
 * Per-tenant token budgets of the paid providers at L4. What the fallback sends a provider is
 * the client's own body, and every request costs money in proportion to what it may generate:
 * each tenant may ask for at most `tokensPerWindow` tokens (`max_tokens × n` of each request
 * sent to a provider) per fixed window of `windowMs`. Past it, `429` with `Retry-After` = the
 * seconds to the next window, when the tenant is admitted again: a refused request is not
 * counted, and a request no provider answered is given back. Counted by each fallback process
 * on its own (one per L1 pod), like the edge's limits per key.
 */

/** What a request that names no `max_tokens` counts as (providers' own defaults go up to this and beyond). */
export const DEFAULT_COUNTED_MAX_TOKENS = 4096;

/** The tokens a request may make a provider generate: `max_tokens` (or `max_completion_tokens`) × `n`. */
export function requestTokens(body: Record<string, unknown>): number {
  const asked = body.max_tokens ?? body.max_completion_tokens;
  const max = typeof asked === "number" && Number.isFinite(asked) && asked > 0 ? Math.ceil(asked) : DEFAULT_COUNTED_MAX_TOKENS;
  const n = typeof body.n === "number" && Number.isInteger(body.n) && body.n > 0 ? body.n : 1;
  return max * n;
}

export type BudgetVerdict = { ok: true; release: () => void } | { ok: false; retryAfterS: number; tooLarge: boolean };

export class TenantTokenBudget {
  private window = -1;
  private readonly used = new Map<string, number>();

  constructor(
    readonly tokensPerWindow: number,
    readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(tokensPerWindow) || tokensPerWindow < 1) throw new Error(`token budget ${tokensPerWindow} must be a whole number ≥ 1`);
  }

  /** Charges `tokens` to `tenant` when they fit its window; `release` gives them back (no provider answered). */
  charge(tenant: string, tokens: number): BudgetVerdict {
    const t = this.now();
    const w = Math.floor(t / this.windowMs);
    if (w !== this.window) {
      this.window = w;
      this.used.clear();
    }
    const retryAfterS = Math.max(1, Math.ceil(((w + 1) * this.windowMs - t) / 1000));
    if (tokens > this.tokensPerWindow) return { ok: false, retryAfterS, tooLarge: true };
    const used = this.used.get(tenant) ?? 0;
    if (used + tokens > this.tokensPerWindow) return { ok: false, retryAfterS, tooLarge: false };
    this.used.set(tenant, used + tokens);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released || this.window !== w) return;
        released = true;
        this.used.set(tenant, Math.max(0, (this.used.get(tenant) ?? 0) - tokens));
      },
    };
  }
}
