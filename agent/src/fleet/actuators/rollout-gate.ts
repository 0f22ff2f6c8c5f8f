/**
 * The one door every rollout switch goes through: the caller's token must still be this
 * process's term and not below the highest token Redis accepted (the rule of gate.ts), else
 * `refused-stale` and the implementation is not reached; a thrown error, or no answer within
 * `timeoutMs` (the call runs inside the leader's period, which must not hang on it), becomes
 * `failed` (asked again next period; a switch is idempotent); each call is counted in
 * `llmha_rollout_switches_total` and logged.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../redis/keys";
import type { Logger } from "../../util/log";
import type { RolloutActuator, RolloutSwitchRequest, RolloutSwitchResult } from "../rollout/types";
import type { RolloutMetrics } from "../rollout/metrics";
import { fencedStaleReason, type TokenCheck } from "./gate";

export interface FencedRolloutOptions {
  redis: Redis;
  keys: RedisKeys;
  lease: TokenCheck;
  log: Logger;
  holder?: string;
  metrics?: RolloutMetrics;
  /** How long one switch call may take. Default 30 s. */
  timeoutMs?: number;
}

export class FencedRolloutActuator implements RolloutActuator {
  readonly kind: string;
  readonly granularity: "node" | "az";
  private readonly log: Logger;

  constructor(private readonly inner: RolloutActuator, private readonly o: FencedRolloutOptions) {
    this.kind = inner.kind;
    this.granularity = inner.granularity;
    this.log = o.log.child({ component: "rollout-actuator", actuator: inner.kind });
  }

  async switch(req: RolloutSwitchRequest): Promise<RolloutSwitchResult> {
    const stale = await fencedStaleReason(this.o, req.token);
    let r: RolloutSwitchResult;
    if (stale) r = { outcome: "refused-stale", detail: stale };
    else {
      const ms = this.o.timeoutMs ?? 30_000;
      let timer: NodeJS.Timeout | undefined;
      try {
        r = await Promise.race([
          this.inner.switch(req),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no answer from the ${this.kind} rollout actuator within ${ms} ms`)), ms);
          }),
        ]);
      } catch (err) {
        r = { outcome: "failed", detail: (err as Error).message };
      } finally {
        clearTimeout(timer);
      }
    }
    this.o.metrics?.switches.inc({ outcome: r.outcome });
    const level = r.outcome === "failed" || r.outcome === "refused-stale" ? "warn" : r.outcome === "already" ? "debug" : "info";
    this.log[level]({ rollout: req.rolloutId, az: req.az, nodes: req.nodes.map((n) => n.nodeId), to: req.to.revision, image: req.to.image, token: req.token, outcome: r.outcome, detail: r.detail }, "rollout switch");
    return r;
  }
}
