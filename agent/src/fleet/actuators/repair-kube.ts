/**
 * The repair actions on a real cluster: the Kubernetes API with the controller's own
 * ServiceAccount (the same URL, token file and CA as the inventory, `LLMHA_INVENTORY`), and EC2
 * `RebootInstances` for a reboot. Only API calls, no kubectl:
 *
 * - cordon / uncordon: `PATCH /api/v1/nodes/<node>` `{"spec":{"unschedulable":true|null}}` (merge patch);
 * - drain: every pod of the inference namespace on the node (`fieldSelector=spec.nodeName=<node>`)
 *   not owned by a DaemonSet gets an Eviction (`POST …/pods/<pod>/eviction`, policy/v1): the API
 *   server refuses one that would break a PodDisruptionBudget (HTTP 429), and the drain is then
 *   `pending`, asked again next period;
 * - restart: `DELETE` of each inference pod on the node: its DaemonSet or Deployment recreates it;
 * - reboot: EC2 `RebootInstances` for the node's instance (the IAM grant is limited to instances
 *   carrying the stack's `Project` tag);
 * - surge and terminate (a replacement): EC2 Auto Scaling on the instance's group (repair-asg.ts).
 *
 * Other namespaces are not touched: the ClusterRole grants `patch` on nodes, and a Role in the
 * inference namespace alone grants pod list, delete and eviction.
 */
import type { EC2Client } from "@aws-sdk/client-ec2";
import type { RepairActuator, RepairContext, RepairStepName, RepairStepResult } from "./repair-types";
import { AsgReplacer, type InstanceReplacer } from "./repair-asg";
import { kubeCall, type KubeReply } from "./kube-client";

export interface KubeRepairOptions {
  /** API server base URL. */
  url: string;
  /** Bearer token file (re-read per call: kubelet rotates it); null for none. */
  tokenFile: string | null;
  caFile: string | null;
  /** The namespace of the inference pods (drained and restarted). */
  namespace: string;
  /** Label selector of the inference pods a restart deletes. Default `app.kubernetes.io/name=inference` (infra/names.ts `APP.inference`). */
  inferenceSelector?: string;
  timeoutMs?: number;
  /** Reboots an instance; default EC2 `RebootInstances` in `region`. */
  rebooter?: InstanceRebooter;
  /** Surges and terminates through the instance's Auto Scaling group; default EC2 Auto Scaling in `region`. */
  replacer?: InstanceReplacer;
  region?: string;
}

export interface InstanceRebooter {
  reboot(instanceId: string): Promise<void>;
}

/** EC2 `RebootInstances` (AWS SDK v3, loaded on the first reboot; credentials from the pod's role). */
export class Ec2Rebooter implements InstanceRebooter {
  private client: EC2Client | null = null;
  constructor(private readonly region?: string) {}
  async reboot(instanceId: string): Promise<void> {
    const { EC2Client, RebootInstancesCommand } = await import("@aws-sdk/client-ec2");
    this.client ??= new EC2Client(this.region ? { region: this.region } : {});
    await this.client.send(new RebootInstancesCommand({ InstanceIds: [instanceId] }));
  }
}

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const INSTANCE = /^i-[0-9a-f]{8,32}$/;

interface KubePod {
  metadata?: { name?: string; ownerReferences?: { kind?: string }[]; deletionTimestamp?: string };
}

export class KubeRepairActuator implements RepairActuator {
  readonly kind = "kubernetes";
  private readonly rebooter: InstanceRebooter;
  private readonly replacer: InstanceReplacer;

  constructor(private readonly o: KubeRepairOptions) {
    this.rebooter = o.rebooter ?? new Ec2Rebooter(o.region);
    this.replacer = o.replacer ?? new AsgReplacer(o.region);
  }

  async cordon(node: string, _ctx?: RepairContext): Promise<RepairStepResult> {
    return this.setUnschedulable("cordon", node, true);
  }
  async uncordon(node: string, _ctx?: RepairContext): Promise<RepairStepResult> {
    return this.setUnschedulable("uncordon", node, null);
  }

  private async setUnschedulable(step: RepairStepName, node: string, value: true | null): Promise<RepairStepResult> {
    checkName(node);
    const r = await this.call("PATCH", `/api/v1/nodes/${node}`, { spec: { unschedulable: value } }, "application/merge-patch+json");
    if (r.status !== 200) return fail(step, node, 1, `PATCH node ${node}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    return { step, target: node, outcome: "applied", calls: 1, detail: value ? `${node} unschedulable` : `${node} schedulable` };
  }

  private async podsOn(node: string, labelSelector?: string): Promise<{ pods: KubePod[]; calls: number }> {
    const q = new URLSearchParams({ fieldSelector: `spec.nodeName=${node}`, ...(labelSelector ? { labelSelector } : {}) });
    const r = await this.call("GET", `/api/v1/namespaces/${this.o.namespace}/pods?${q.toString()}`);
    if (r.status !== 200) throw new Error(`list pods on ${node}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    const items = (r.body as { items?: unknown } | null)?.items;
    if (!Array.isArray(items)) throw new Error(`list pods on ${node}: not a PodList`);
    return { pods: (items as KubePod[]).filter((p) => typeof p?.metadata?.name === "string" && !p.metadata.deletionTimestamp), calls: 1 };
  }

  async drain(node: string, _ctx?: RepairContext): Promise<RepairStepResult> {
    checkName(node);
    const { pods } = await this.podsOn(node);
    const evict = pods.filter((p) => !(p.metadata?.ownerReferences ?? []).some((o) => o.kind === "DaemonSet"));
    let calls = 1;
    const held: string[] = [];
    for (const p of evict) {
      const name = p.metadata!.name!;
      const r = await this.call("POST", `/api/v1/namespaces/${this.o.namespace}/pods/${name}/eviction`, { apiVersion: "policy/v1", kind: "Eviction", metadata: { name, namespace: this.o.namespace } });
      calls += 1;
      if (r.status === 429) held.push(name); // a PodDisruptionBudget refuses it now
      else if (r.status !== 200 && r.status !== 201 && r.status !== 404) return fail("drain", node, calls, `evict ${name}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    }
    if (held.length) return { step: "drain", target: node, outcome: "pending", calls, detail: `a PodDisruptionBudget holds ${held.length} pod(s): ${held.slice(0, 5).join(", ")}` };
    return { step: "drain", target: node, outcome: evict.length ? "applied" : "already", calls, detail: `${evict.length} pod(s) evicted from ${node}` };
  }

  async restart(node: string, _ctx?: RepairContext): Promise<RepairStepResult> {
    checkName(node);
    const { pods } = await this.podsOn(node, this.o.inferenceSelector ?? "app.kubernetes.io/name=inference");
    let calls = 1;
    for (const p of pods) {
      const name = p.metadata!.name!;
      const r = await this.call("DELETE", `/api/v1/namespaces/${this.o.namespace}/pods/${name}`);
      calls += 1;
      if (r.status !== 200 && r.status !== 202 && r.status !== 404) return fail("restart", node, calls, `delete ${name}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    }
    if (!pods.length) return fail("restart", node, calls, `no inference pod on ${node} in ${this.o.namespace}`);
    return { step: "restart", target: node, outcome: "applied", calls, detail: `${pods.length} inference pod(s) on ${node} deleted` };
  }

  async reboot(instanceId: string, _ctx?: RepairContext): Promise<RepairStepResult> {
    if (!INSTANCE.test(instanceId)) return fail("reboot", instanceId, 0, `${JSON.stringify(instanceId.slice(0, 64))} is not an EC2 instance id`);
    await this.rebooter.reboot(instanceId);
    return { step: "reboot", target: instanceId, outcome: "applied", calls: 1, detail: `${instanceId} rebooting` };
  }

  async surge(instanceId: string, _ctx?: RepairContext): Promise<RepairStepResult> {
    if (!INSTANCE.test(instanceId)) return fail("surge", instanceId, 0, `${JSON.stringify(instanceId.slice(0, 64))} is not an EC2 instance id`);
    const r = await this.replacer.surge(instanceId);
    return { step: "surge", target: instanceId, outcome: r.changed || !r.surged ? "applied" : "already", calls: r.calls, detail: r.detail, surged: r.surged };
  }

  async terminate(instanceId: string, decrement: boolean, _ctx?: RepairContext): Promise<RepairStepResult> {
    if (!INSTANCE.test(instanceId)) return fail("terminate", instanceId, 0, `${JSON.stringify(instanceId.slice(0, 64))} is not an EC2 instance id`);
    const r = await this.replacer.terminate(instanceId, decrement);
    return { step: "terminate", target: instanceId, outcome: r.changed ? "applied" : "already", calls: r.calls, detail: r.detail };
  }

  private call(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<KubeReply> {
    return kubeCall(this.o, method, path, body, contentType);
  }
}

function checkName(node: string): void {
  if (!NAME.test(node)) throw new Error(`${JSON.stringify(node.slice(0, 64))} is not a Kubernetes node name`);
}

function fail(step: RepairStepName, target: string, calls: number, detail: string): RepairStepResult {
  return { step, target, outcome: "failed", calls, detail };
}
