/**
 * The revisions a rollout allows (the leader's fenced `rollout` hash, field `allow`:
 * comma-separated revisions: the old and the new while a rollout is under way, the fleet's
 * revision once it ended). The agent reads it every few periods and checks its server's
 * revision against it instead of `LLMHA_MODEL_REVISION` (evaluator/rules.ts `expectedRevisions`),
 * so a node on either revision of an active rollout is not `MODEL_MISMATCH`, and one left on the
 * old revision after it is again.
 *
 * - The hash or the field absent, or naming nothing: the configured revision, as without rollouts.
 * - Redis not answering before any read: the configured revision. Redis not answering after a
 *   read: the last answer stands until Redis answers again. Dropping it would take every node of
 *   a rollout's new revision out of rotation because Redis blinked, while the leader, which
 *   could roll back, cannot act either; the agent keeps serving what the fleet last allowed.
 */
import type { Logger } from "../util/log";
import { Loop } from "../util/loop";

/** The revisions `allow` names (trimmed, no empty ones); null when it names none. */
export function parseAllow(v: string | null | undefined): string[] | null {
  const list = (v ?? "").split(",").map((x) => x.trim()).filter((x) => x.length > 0);
  return list.length > 0 ? [...new Set(list)] : null;
}

export interface RolloutAllowOptions {
  /** The hash's `allow` field (null: no hash, no field); throws when Redis does not answer. */
  read(): Promise<string | null>;
  periodMs: number;
  log: Logger;
  /** The revisions to accept now; null: the configured one. Called on changes only. */
  onChange(allowed: readonly string[] | null): void;
}

export class RolloutAllowWatch {
  private readonly loop: Loop;
  private current: readonly string[] | null = null;
  private failing = false;

  constructor(private readonly o: RolloutAllowOptions) {
    this.loop = new Loop(o.periodMs, () => this.runOnce().then(() => undefined), (err) => o.log.error({ err, source: "rollout-allow" }, "rollout read failed unexpectedly"));
  }

  get allowed(): readonly string[] | null {
    return this.current;
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
  }

  /** One read; returns what is accepted now. */
  async runOnce(): Promise<readonly string[] | null> {
    let raw: string | null;
    try {
      raw = await this.o.read();
    } catch (err) {
      if (!this.failing) {
        const keep = this.current ? `keeping the last allowed revisions (${this.current.join(", ")})` : "checking the configured revision";
        this.o.log.warn({ err: (err as Error).message, source: "rollout-allow" }, `cannot read the fleet's rollout; ${keep}`);
      }
      this.failing = true;
      return this.current;
    }
    this.failing = false;
    const next = parseAllow(raw);
    if ((next ?? []).join(",") !== (this.current ?? []).join(",")) {
      this.o.log.info({ event: "rollout-allow", allowed: next }, next ? `revisions allowed by the fleet's rollout: ${next.join(", ")}` : "no rollout names revisions: checking the configured revision");
      this.current = next;
      this.o.onChange(next);
    }
    return this.current;
  }
}
