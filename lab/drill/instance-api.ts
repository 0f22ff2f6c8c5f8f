/**
 * The local cloud's instance API apart from the instances themselves (local-instances.ts): what
 * they need of the cloud (power, one operation at a time per node, DNS), the records the drill's
 * report reads (each repair call, launch and termination), and `POST /instances/<step>`.
 */
import type { IncomingMessage } from "node:http";
import type { LocalRepairReply } from "../../agent/src/fleet/actuators/repair-local";
import type { RepairStepName } from "../../agent/src/fleet/actuators/repair-types";
import type { SimNode } from "../sim/sim-node";

/** What the instances need of the local cloud: the power state it keeps per node, one operation at a time per node, DNS. */
export interface InstanceHost {
  powerOf(id: string): "stopped" | "starting" | "running" | "stopping";
  setPower(id: string, p: "stopped" | "starting" | "running" | "stopping"): void;
  /** Runs `op` after the node's earlier operations (boot, release, reboot). */
  enqueue(n: SimNode, op: () => Promise<void>): void;
  /** Publishes the AZ's node records (a booted node in, a halted one out). */
  publish(az: string): Promise<void>;
  now(): number;
  log(line: string): void;
}

/** One repair call as the cloud received it (drill clock), for the report. */
export interface InstanceAction {
  t: number;
  step: RepairStepName;
  /** The node or instance named. */
  target: string;
  /** The node it is (or `?`). */
  node: string;
  outcome: LocalRepairReply["outcome"] | "error";
  detail: string;
  token: number;
}

/** A termination as the cloud saw it (drill clock): the replacement its surge booted, and what that node's agent answered then. */
export interface InstanceTermination {
  t: number;
  instance: string;
  node: string;
  /** The spare node the surge for this instance booted (null: none was booted). */
  replacement: string | null;
  /** Its agent's `/readyz` status at the termination (`ERR`: it did not answer). */
  replacementStatus: string | null;
}

/** A surge's launch as the cloud saw it (drill clock). */
export interface InstanceLaunch {
  t: number;
  az: string;
  /** The instance it replaces. */
  replaces: string;
  /** The spare node booted; null when the launch failed. */
  node: string | null;
  /** AWS's message for a failed launch. */
  message?: string;
}

export class InstanceRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InstanceRequestError";
  }
}

/** EC2's message for a capacity shortage (the same text the standby's groups fail with, local-cloud.ts). */
export type CapacityMessage = (instanceType: string, az: string) => string;

/** What answers a repair step (`LocalInstances.answer`). */
export interface InstanceStepAnswerer {
  answer(step: string, body: Record<string, unknown>): LocalRepairReply;
}

/** `POST /instances/<step>` on the local cloud's port: a repair step on an instance; a bad request is a 400 naming it. */
export async function instanceStep(instances: InstanceStepAnswerer, req: IncomingMessage, send: (code: number, body: object) => void): Promise<void> {
  try {
    let raw = "";
    for await (const chunk of req) raw += String(chunk);
    const body = JSON.parse(raw || "{}") as Record<string, unknown>;
    send(200, instances.answer((req.url ?? "").slice("/instances/".length), body));
  } catch (err) {
    send(err instanceof InstanceRequestError || err instanceof SyntaxError ? 400 : 500, { error: (err as Error).message });
  }
}
