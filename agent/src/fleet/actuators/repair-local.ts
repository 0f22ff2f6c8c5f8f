/**
 * The repair actuator of the drill (`LLMHA_ACTUATOR=local` with `LLMHA_REPAIR_MODE=act`): the
 * same seven steps as `repair-kube.ts`, over loopback HTTP to the drill's local cloud
 * (`LLMHA_LOCAL_CLOUD_URL`), which owns the simulated instances (lab/drill/local-instances.ts):
 *
 * | step      | request                                   | what the local cloud does (the real call)                         |
 * |-----------|-------------------------------------------|-------------------------------------------------------------------|
 * | cordon    | `POST /instances/cordon {node}`           | the Node's `spec.unschedulable` (PATCH node)                      |
 * | uncordon  | `POST /instances/uncordon {node}`         | cleared                                                           |
 * | drain     | `POST /instances/drain {node}`            | the inference pod evicted through its preStop drain; `pending` until it holds no request (Eviction API) |
 * | restart   | `POST /instances/restart {node}`          | a new inference server (pod delete)                               |
 * | reboot    | `POST /instances/reboot {instance}`       | processes stopped, the boot time, started again (RebootInstances) |
 * | surge     | `POST /instances/surge {instance}`        | one more instance of the AZ's group (desired + 1 within its max)  |
 * | terminate | `POST /instances/terminate {instance, decrement}` | the instance stopped for good (TerminateInstanceInAutoScalingGroup) |
 *
 * Answers are desired-state (`applied`, `already`, `pending`) and come at once: the work goes on
 * in the cloud. The token and reason travel for the cloud's log only: fencing happened in
 * `FencedRepairActuator` before this is reached. An HTTP error is a `failed` step naming it.
 */
import type { RepairActuator, RepairContext, RepairStepName, RepairStepResult } from "./repair-types";

export interface LocalRepairOptions {
  /** `LLMHA_LOCAL_CLOUD_URL`, e.g. `http://127.0.0.1:PORT`. */
  url: string;
  /** Per request. Default 10000 ms (a loaded drill host answers slowly; a failed step holds the node for good). */
  timeoutMs?: number;
}

/** What the local cloud answers to a repair step. */
export interface LocalRepairReply {
  outcome: "applied" | "already" | "pending";
  detail: string;
  /** `surge` only: whether the group was given one more instance (false: at its max). */
  surged?: boolean;
}

const OUTCOMES = new Set(["applied", "already", "pending"]);

export class LocalRepairActuator implements RepairActuator {
  readonly kind = "local";

  constructor(private readonly o: LocalRepairOptions) {}

  cordon(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.post("cordon", node, ctx, { node });
  }
  uncordon(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.post("uncordon", node, ctx, { node });
  }
  drain(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.post("drain", node, ctx, { node });
  }
  restart(node: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.post("restart", node, ctx, { node });
  }
  reboot(instanceId: string, ctx: RepairContext): Promise<RepairStepResult> {
    return this.post("reboot", instanceId, ctx, { instance: instanceId });
  }
  async surge(instanceId: string, ctx: RepairContext): Promise<RepairStepResult> {
    const r = await this.post("surge", instanceId, ctx, { instance: instanceId });
    return r.outcome === "failed" ? r : { ...r, surged: r.surged === true };
  }
  terminate(instanceId: string, decrement: boolean, ctx: RepairContext): Promise<RepairStepResult> {
    return this.post("terminate", instanceId, ctx, { instance: instanceId, decrement });
  }

  private async post(step: RepairStepName, target: string, ctx: RepairContext, body: object): Promise<RepairStepResult> {
    const url = `${this.o.url.replace(/\/+$/, "")}/instances/${step}`;
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...body, token: ctx.token, reason: ctx.reason }),
        signal: AbortSignal.timeout(this.o.timeoutMs ?? 10_000),
      });
      text = await res.text();
    } catch (err) {
      return { step, target, outcome: "failed", calls: 1, detail: `local cloud /instances/${step}: ${(err as Error).message}` };
    }
    if (!res.ok) return { step, target, outcome: "failed", calls: 1, detail: `local cloud /instances/${step}: HTTP ${res.status} ${text.slice(0, 200)}` };
    let reply: Partial<LocalRepairReply>;
    try {
      reply = JSON.parse(text) as Partial<LocalRepairReply>;
    } catch {
      reply = {};
    }
    if (!OUTCOMES.has(reply.outcome as string)) return { step, target, outcome: "failed", calls: 1, detail: `local cloud /instances/${step}: not an answer: ${text.slice(0, 200)}` };
    return { step, target, outcome: reply.outcome!, calls: 1, detail: String(reply.detail ?? "").slice(0, 500), ...(typeof reply.surged === "boolean" ? { surged: reply.surged } : {}) };
  }
}
