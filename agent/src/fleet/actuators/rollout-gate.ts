/**
 * The one door every rollout switch goes through: the caller's token must still be this
 * process's term and not below the highest token Redis accepted (the rule of gate.ts), else
 * `refused-stale` and the implementation is not reached; a thrown error becomes `failed`; each
 * call is counted in `llmha_rollout_switches_total` and logged.
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
      try {
        r = await this.inner.switch(req);
      } catch (err) {
        r = { outcome: "failed", detail: (err as Error).message };
      }
    }
    this.o.metrics?.switches.inc({ outcome: r.outcome });
    const level = r.outcome === "failed" || r.outcome === "refused-stale" ? "warn" : r.outcome === "already" ? "debug" : "info";
    this.log[level]({ rollout: req.rolloutId, az: req.az, nodes: req.nodes.map((n) => n.nodeId), to: req.to.revision, image: req.to.image, token: req.token, outcome: r.outcome, detail: r.detail }, "rollout switch");
    return r;
  }
}
