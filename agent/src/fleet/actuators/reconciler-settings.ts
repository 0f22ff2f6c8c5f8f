/** The reconciler's settings (reconciler.ts), with their defaults and checks. */
export interface ReconcilerSettings {
  /** Ask for a wake or a shift again this often while it is wanted. Default 30000 ms. */
  reassertMs: number;
  /** Expiry of each zonal shift (renewed every `reassertMs`). Default 1800000 ms (`LLMHA_SHIFT_EXPIRY_MS`). */
  shiftExpiryMs: number;
  /** First retry delay after a failed call; doubles per failure. Default 1000 ms. */
  retryBaseMs: number;
  /** Longest retry delay. Default 30000 ms. */
  retryMaxMs: number;
  /** While a wake has nothing in service, ask it again this often (it reads the launches and falls back). Default 5000 ms. */
  wakeFollowMs: number;
  /** A wake released with no healthy standby node makes the next wait this long, doubling per such wake. Default 300000 ms. */
  backoffBaseMs: number;
  /** Longest wait before a new wake. Default 3600000 ms. */
  backoffMaxMs: number;
}

export const DEFAULT_RECONCILER_SETTINGS: Readonly<ReconcilerSettings> = Object.freeze({
  reassertMs: 30_000,
  shiftExpiryMs: 1_800_000,
  retryBaseMs: 1000,
  retryMaxMs: 30_000,
  wakeFollowMs: 5000,
  backoffBaseMs: 300_000,
  backoffMaxMs: 3_600_000,
});

export class ReconcilerSettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReconcilerSettingsError";
  }
}

export function resolveReconcilerSettings(s: Partial<ReconcilerSettings> = {}): Readonly<ReconcilerSettings> {
  const r = Object.freeze({ ...DEFAULT_RECONCILER_SETTINGS, ...s });
  if (!(r.reassertMs > 0 && r.retryBaseMs > 0 && r.retryMaxMs >= r.retryBaseMs && r.wakeFollowMs > 0)) {
    throw new ReconcilerSettingsError("need reassertMs > 0, wakeFollowMs > 0 and 0 < retryBaseMs ≤ retryMaxMs");
  }
  if (!(r.backoffBaseMs > 0 && r.backoffMaxMs >= r.backoffBaseMs)) throw new ReconcilerSettingsError("need 0 < backoffBaseMs ≤ backoffMaxMs");
  if (r.reassertMs >= r.shiftExpiryMs) throw new ReconcilerSettingsError(`reassertMs (${r.reassertMs}) must be below shiftExpiryMs (${r.shiftExpiryMs}): a shift must be renewed before it ends`);
  return r;
}

