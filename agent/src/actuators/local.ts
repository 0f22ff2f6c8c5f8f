/**
 * The drill's actuator (kind `local`): the same four actions over loopback HTTP to the local
 * cloud the drill runs (`drill/local-cloud.ts`), which owns the simulated standby nodes and
 * the AZ proxies. The token and reason travel with each request for the cloud's log only:
 * fencing was done by `FencedActuator` before this is reached.
 */
import type { ActionContext, ActionName, ActionResult, Actuator, ShiftContext } from "./types";

export interface LocalActuatorOptions {
  /** `LLMHA_LOCAL_CLOUD_URL`, e.g. `http://127.0.0.1:PORT`. */
  url: string;
  /** Per request. Default 5000 ms. */
  timeoutMs?: number;
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

const PATHS: Record<ActionName, string> = {
  "standby.wake": "/standby/wake",
  "standby.release": "/standby/release",
  "shift.start": "/shift/start",
  "shift.cancel": "/shift/cancel",
};

export class LocalActuator implements Actuator {
  readonly kind = "local";

  constructor(private readonly o: LocalActuatorOptions) {}

  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.post("standby.wake", az, ctx);
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

  private async post(action: ActionName, az: string, ctx: ActionContext, extra: object = {}): Promise<ActionResult> {
    const started = performance.now();
    const res = await fetch(`${this.o.url.replace(/\/+$/, "")}${PATHS[action]}`, {
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
