/**
 * What the fallback reads from the controller: the tier (L4 = the fleet cannot serve) and
 * the standby AZ's desired state, for the `Retry-After` of a 503 (the wake-up's ETA).
 */
import type { Redis } from "ioredis";
import type { TierLevel } from "../../../../contracts/controller";

export interface TierView {
  /** The published level; null when Redis cannot be read or nothing is published. */
  level: TierLevel | null;
  /** Redis answered. */
  readable: boolean;
  /** The standby AZ is wanted awake (a wake-up under way). */
  standbyWaking: boolean;
}

export class TierReader {
  private cached: { at: number; view: TierView } | null = null;
  private wakingSince: number | null = null;

  constructor(
    private readonly redis: Redis | null,
    private readonly cluster: string,
    private readonly opts: { cacheMs?: number; retryAfterS: number; wakeEtaS: number; now?: () => number },
  ) {}

  async read(): Promise<TierView> {
    const now = (this.opts.now ?? Date.now)();
    if (this.cached && now - this.cached.at < (this.opts.cacheMs ?? 500)) return this.cached.view;
    let view: TierView = { level: null, readable: false, standbyWaking: false };
    if (this.redis) {
      try {
        const p = this.redis.pipeline();
        p.hget(`llmha:${this.cluster}:tier`, "level");
        p.hget(`llmha:${this.cluster}:standby:wake`, "wake");
        const [[e1, level], [e2, wake]] = (await p.exec()) as [[Error | null, string | null], [Error | null, string | null]];
        if (!e1 && !e2) view = { level: (level as TierLevel | null) ?? null, readable: true, standbyWaking: wake === "1" };
      } catch {
        // Unreadable: the caller decides what unknown means.
      }
    }
    if (view.standbyWaking) this.wakingSince ??= now;
    else if (view.readable) this.wakingSince = null;
    this.cached = { at: now, view };
    return view;
  }

  /** Seconds a client should wait: what is left of the standby's wake-up ETA, else the default. */
  retryAfterS(): number {
    const now = (this.opts.now ?? Date.now)();
    if (this.wakingSince !== null) return Math.max(5, Math.ceil(this.opts.wakeEtaS - (now - this.wakingSince) / 1000));
    return this.opts.retryAfterS;
  }
}
