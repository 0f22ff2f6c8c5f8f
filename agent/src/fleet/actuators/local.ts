/**
 * The drill's actuator (kind `local`): the same four actions over loopback HTTP to the local
 * cloud the drill runs (`drill/local-cloud.ts`), which owns the simulated standby nodes and
 * the AZ proxies. The token and reason travel with each request for the cloud's log only:
 * fencing was done by `FencedActuator` before this is reached.
 *
 * The wake is followed as the AWS actuator follows it (wake-follow.ts, the same decision):
 * `GET /standby/groups` shows the AZ's groups in their fallback order with their launches,
 * and each call wakes at most one new group (`POST /standby/wake {az, group}`).
 */
import type { ActionContext, ActionResult, Actuator, ShiftContext, StateActionName } from "./types";
import { DEFAULT_WAKE_BOUND_MS, planWake, type WakeGroupView } from "./wake-follow";

export interface LocalActuatorOptions {
  /** `LLMHA_LOCAL_CLOUD_URL`, e.g. `http://127.0.0.1:PORT`. */
  url: string;
  /** Per request. Default 5000 ms. */
  timeoutMs?: number;
  /** A woken group with nothing in service this long has failed. Default 900000 ms. */
  wakeBoundMs?: number;
  /** A woken group in service with no healthy standby node this long has failed (`unhealthy`). Default 600000 ms. */
  healthyBoundMs?: number;
}

/** `GET /standby/groups?az=`: the AZ's groups as steps, in fallback order. */
export interface LocalGroupsReply {
  steps: WakeGroupView[][];
}

/** What the local cloud answers to every action. */
export interface LocalCloudReply {
  outcome: "applied" | "already";
  detail: string;
}

export class LocalCloudError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LocalCloudError";
  }
}

const PATHS: Record<StateActionName, string> = {
  "standby.wake": "/standby/wake",
  "standby.release": "/standby/release",
  "shift.start": "/shift/start",
  "shift.cancel": "/shift/cancel",
};

export class LocalActuator implements Actuator {
  readonly kind = "local";

  constructor(private readonly o: LocalActuatorOptions) {}

  async wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    const started = performance.now();
    const res = await fetch(`${this.base}/standby/groups?az=${encodeURIComponent(az)}`, { signal: AbortSignal.timeout(this.o.timeoutMs ?? 5000) });
    const text = await res.text();
    if (!res.ok) throw new LocalCloudError(`local cloud /standby/groups: HTTP ${res.status} ${text.slice(0, 200)}`);
    const { steps } = JSON.parse(text) as LocalGroupsReply;
    const plan = planWake(steps, { boundMs: this.o.wakeBoundMs ?? DEFAULT_WAKE_BOUND_MS, healthyBoundMs: this.o.healthyBoundMs }, Date.now(), ctx.wakeHealth);
    let top = -1;
    steps.forEach((row, i) => {
      if (row.some((g) => g.woken)) top = i;
    });
    // The new step, else a re-assertion of the one in charge (answers `already`).
    const step = plan.wake ?? Math.max(top, 0);
    let outcome: ActionResult["outcome"] = "already";
    const details: string[] = [];
    let calls = 1;
    for (const g of steps[step] ?? []) {
      const r = await this.post("standby.wake", az, ctx, { group: g.name });
      calls += 1;
      if (r.outcome === "applied") outcome = "applied";
      details.push(r.detail);
    }
    if (plan.report.phase === "unavailable") outcome = "failed";
    return { action: "standby.wake", az, outcome, calls, detail: `${details.join("; ")}; ${plan.detail}`, durationMs: performance.now() - started, wake: plan.report };
  }

  private get base(): string {
    return this.o.url.replace(/\/+$/, "");
  }
  releaseStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.post("standby.release", az, ctx);
  }
  startZonalShift(az: string, ctx: ShiftContext): Promise<ActionResult> {
    return this.post("shift.start", az, ctx, { expiresInMs: ctx.expiresInMs });
  }
  cancelZonalShift(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.post("shift.cancel", az, ctx);
  }

  private async post(action: StateActionName, az: string, ctx: ActionContext, extra: object = {}): Promise<ActionResult> {
    const started = performance.now();
    const res = await fetch(`${this.base}${PATHS[action]}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ az, token: ctx.token, reason: ctx.reason, ...extra }),
      signal: AbortSignal.timeout(this.o.timeoutMs ?? 5000),
    });
    const text = await res.text();
    if (!res.ok) throw new LocalCloudError(`local cloud ${PATHS[action]}: HTTP ${res.status} ${text.slice(0, 200)}`);
    const body = JSON.parse(text) as LocalCloudReply;
    return { action, az, outcome: body.outcome, calls: 1, detail: body.detail, durationMs: performance.now() - started };
  }
}
