/** `LLMHA_ACTUATOR=dry-run`: every rollout switch is logged and reported `dry-run`; nothing changes (the rollout waits on its load-time gate). */
import type { Logger } from "../../util/log";
import type { RolloutActuator, RolloutSwitchRequest, RolloutSwitchResult } from "../rollout/types";

export class DryRunRolloutActuator implements RolloutActuator {
  readonly kind = "dry-run";
  readonly granularity = "node" as const;
  constructor(private readonly log: Logger) {}
  switch(req: RolloutSwitchRequest): Promise<RolloutSwitchResult> {
    const detail = `would switch ${req.nodes.map((n) => n.nodeId).join(",")} in ${req.az} to ${req.to.revision}${req.to.image ? ` (image ${req.to.image})` : ""}`;
    this.log.info({ rollout: req.rolloutId, az: req.az, token: req.token, detail }, "dry-run: no call made");
    return Promise.resolve({ outcome: "dry-run", detail });
  }
}
