/** The local cloud's records and AWS's messages (local-cloud.ts): what the drill's report and scenarios read. */
import type { LocalCloudReply } from "../../agent/src/fleet/actuators/local";
import type { StateActionName as ActionName } from "../../agent/src/fleet/actuators/types";

export type NodePower = "stopped" | "starting" | "running" | "stopping";

/** Every action the cloud received, with its answer (the drill's report reads these). */
export interface CloudAction {
  /** On the drill's clock. */
  t: number;
  action: ActionName;
  az: string;
  token: number;
  reason: string;
  outcome: LocalCloudReply["outcome"] | "error";
  detail: string;
  /** The node group a wake named. */
  group?: string;
}

/** A node group of an AZ (an Auto Scaling group of one instance type). */
export interface CloudGroup {
  name: string;
  az: string;
  instanceType: string;
  /** Launch attempts left to fail (capacity fault). */
  failFirst: number;
  woken: boolean;
  wokenAt: number | null;
  /** Its launch succeeded: the AZ's nodes were booted by it. */
  launched: boolean;
  /** Failed launches since the wake (epoch ms, AWS's message). */
  failures: { at: number; message: string }[];
  timer: NodeJS.Timeout | null;
  /** The node ids its launches boot (absent: every node of the AZ). */
  nodes?: string[];
  /** Its launches boot their nodes onto lost GPUs. */
  badGpus?: boolean;
}

/** A failed launch as the cloud recorded it (drill clock), for the report. */
export interface CloudLaunchFailure {
  t: number;
  group: string;
  message: string;
}

/** AWS's message for a capacity shortage (as Auto Scaling records it in a failed launch activity). */
export function capacityMessage(instanceType: string, az: string): string {
  return `We currently do not have sufficient ${instanceType} capacity in the Availability Zone you requested (${az}). Our system will be working on provisioning additional capacity. Launching EC2 instance failed.`;
}

/** How long a failed launch takes to show, and how often a woken group retries (Auto Scaling: seconds, tens of seconds). */
export const LAUNCH_FAIL_MS = 1000;
export const LAUNCH_RETRY_MS = 10_000;
