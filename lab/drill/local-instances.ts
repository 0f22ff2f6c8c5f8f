/**
 * The local cloud's instances (`POST /instances/<step>`): what the repair ladder's `local`
 * actuator (agent/src/fleet/actuators/repair-local.ts) acts on in the drill. Each simulated
 * node is an instance with a stable id (`i-` and 17 hex digits, as EC2's; a new one only when
 * the drill puts a fresh instance in a terminated node's slot), listed in the local Kubernetes
 * API's Nodes as `spec.providerID` (`aws:///<az>/<id>`), which the leader's inventory reads.
 * Each active AZ is one Auto Scaling group: its running nodes (desired) and, up to its max, its
 * spare slots (nodes started stopped, booted only by a surge).
 *
 * | step      | body                    | what it does                                                     | AWS / Kubernetes |
 * |-----------|-------------------------|------------------------------------------------------------------|------------------|
 * | cordon    | `{node}`                | a flag on the Node (`spec.unschedulable`)                        | PATCH node |
 * | uncordon  | `{node}`                | the flag cleared                                                 | PATCH node |
 * | drain     | `{node}`                | the inference pod evicted: the shipped preStop hook writes the drain file (the agent answers `drain`, in-flight requests finish), then SIGTERM; `pending` until done | Eviction API |
 * | restart   | `{node}`                | a new inference server (the drain file removed, as a new pod's init container does) | pod delete |
 * | reboot    | `{instance}`            | processes stopped, the boot time, started again; the fake nvidia-smi's state keeps only what a reboot does not heal (`afterReboot`), the kernel log starts empty | RebootInstances |
 * | surge     | `{instance}`            | desired + 1 within the group's max: a spare slot boots (in DNS from its boot, as a woken standby node); a repeat for the same instance is `already`; at the max `surged: false`; `capacityFault` fails launches with AWS's message, retried every 10 s | UpdateAutoScalingGroup |
 * | terminate | `{instance, decrement}` | the node stopped for good and dropped from DNS (as a release); without `decrement` the group launches a replacement | TerminateInstanceInAutoScalingGroup |
 *
 * Answers are desired-state and idempotent, and come at once: the work goes on in the background.
 */
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import type { LocalRepairReply } from "../../agent/src/fleet/actuators/repair-local";
import type { RepairStepName } from "../../agent/src/fleet/actuators/repair-types";
import { sleep } from "../../agent/src/util/net";
import { afterReboot } from "../sim/nvsmi-state";
import type { SimNode } from "../sim/sim-node";
import { InstanceRequestError, type CapacityMessage, type InstanceAction, type InstanceHost, type InstanceLaunch, type InstanceTermination } from "./instance-api";

export { instanceStep, InstanceRequestError, type InstanceAction, type InstanceLaunch, type InstanceTermination } from "./instance-api";

interface Group {
  az: string;
  instanceType: string;
  desired: number;
  max: number;
  /** Instance replaced → the spare node its surge booted (null while its launch has not succeeded). */
  surged: Map<string, string | null>;
  /** Launches left to fail with the capacity message. */
  failFirst: number;
  timers: Set<NodeJS.Timeout>;
}

/** How long a failed launch takes to show, and how often the group retries it (as the standby's groups). */
const LAUNCH_FAIL_MS = 1000;
const LAUNCH_RETRY_MS = 10_000;

export class LocalInstances {
  readonly actions: InstanceAction[] = [];
  readonly launches: InstanceLaunch[] = [];
  readonly terminations: InstanceTermination[] = [];
  private nodes: SimNode[] = [];
  private spares: SimNode[] = [];
  private readonly generation = new Map<string, number>();
  private readonly cordoned = new Set<string>();
  private readonly terminated = new Set<string>();
  private readonly rebooting = new Set<string>();
  /** Node id → the eviction under way or done (cleared when a new server starts). */
  private readonly evictions = new Map<string, { done: boolean; detail: string }>();
  private readonly groups = new Map<string, Group>();
  /** How long a reboot keeps the node down (ms). */
  bootMs = 10_000;

  constructor(
    private readonly host: InstanceHost,
    private readonly capacityMessage: CapacityMessage,
  ) {}

  /** The instances: every node (running ones are the groups' desired) and the spare slots (stopped until a surge). */
  attach(nodes: readonly SimNode[], spares: readonly SimNode[]): void {
    this.nodes = [...nodes];
    this.spares = [...spares];
    for (const az of new Set([...nodes, ...spares].map((n) => n.az))) {
      const desired = nodes.filter((n) => n.az === az && n.running).length;
      const slots = spares.filter((n) => n.az === az).length;
      this.groups.set(az, { az, instanceType: "p4d.24xlarge", desired, max: desired + slots, surged: new Map(), failFirst: 0, timers: new Set() });
    }
  }

  /** The node's instance id: stable across reboots, new when the drill puts a fresh instance in its slot (`renew`). */
  instanceOf(nodeId: string): string {
    const gen = this.generation.get(nodeId) ?? 0;
    return `i-0${createHash("sha1").update(`${nodeId}#${gen}`).digest("hex").slice(0, 16)}`;
  }

  /** Every instance: the nodes and the spare slots. */
  all(): SimNode[] {
    return [...this.nodes, ...this.spares];
  }

  isCordoned(nodeId: string): boolean {
    return this.cordoned.has(nodeId);
  }

  isTerminated(nodeId: string): boolean {
    return this.terminated.has(nodeId);
  }

  /** The group of an AZ (desired, max, surges) for the scenarios' figures. */
  group(az: string): { desired: number; max: number; surged: ReadonlyMap<string, string | null> } | null {
    return this.groups.get(az) ?? null;
  }

  /** The AZ group's max (a scenario makes a group full). */
  setMax(az: string, max: number): void {
    const g = this.groupOf(az);
    g.max = max;
  }

  /** The AZ group's next `n` launches fail with AWS's capacity message (0 lifts it). */
  capacityFault(az: string, n: number): void {
    this.groupOf(az).failFirst = n;
  }

  /**
   * Puts the world back between scenarios: a terminated node's slot gets a fresh instance (a new
   * id, booted, uncordoned), and a spare a surge booted goes back to a stopped slot (halted,
   * out of DNS); each group's desired and surges are reset. Resolves when every boot and halt
   * is done.
   */
  async reset(): Promise<void> {
    for (const g of this.groups.values()) {
      for (const t of g.timers) clearTimeout(t);
      g.timers.clear();
      g.surged.clear();
      g.failFirst = 0;
    }
    const ops: Promise<void>[] = [];
    for (const n of this.spares.filter((s) => this.host.powerOf(s.id) !== "stopped")) ops.push(this.stopFor(n, "spare slot back to stopped"));
    for (const n of this.nodes.filter((x) => this.terminated.has(x.id))) {
      this.terminated.delete(n.id);
      this.generation.set(n.id, (this.generation.get(n.id) ?? 0) + 1);
      // New hardware: its GPUs clean, its kernel log empty.
      await n.gpuFault(null);
      await writeFile(n.xidLogPath, "");
      ops.push(this.bootFor(n, `fresh instance ${this.instanceOf(n.id)} in the terminated slot`));
    }
    for (const n of [...this.nodes, ...this.spares]) this.terminated.delete(n.id);
    this.cordoned.clear();
    await Promise.all(ops);
    for (const g of this.groups.values()) {
      const slots = this.spares.filter((n) => n.az === g.az).length;
      g.desired = this.nodes.filter((n) => n.az === g.az && n.running).length;
      g.max = g.desired + slots;
    }
  }

  /** Stops pending launch retries (the drill ends). */
  stop(): void {
    for (const g of this.groups.values()) for (const t of g.timers) clearTimeout(t);
  }

  /** One repair call: validates, acts (in the background), logs and answers. */
  answer(step: string, body: Record<string, unknown>): LocalRepairReply {
    const rec: InstanceAction = { t: this.host.now(), step: step as RepairStepName, target: "", node: "?", outcome: "error", detail: "", token: Number(body.token ?? 0) };
    try {
      const reply = this.act(step, body, rec);
      rec.outcome = reply.outcome;
      rec.detail = reply.detail;
      return reply;
    } catch (err) {
      rec.detail = (err as Error).message;
      throw err;
    } finally {
      this.actions.push(rec);
      if (rec.outcome !== "pending" && rec.outcome !== "already") this.host.log(`local cloud: ${step} ${rec.target} → ${rec.outcome} (${rec.detail}; token ${rec.token})`);
    }
  }

  private act(step: string, body: Record<string, unknown>, rec: InstanceAction): LocalRepairReply {
    const byNode = step === "cordon" || step === "uncordon" || step === "drain" || step === "restart";
    const name = byNode ? body.node : body.instance;
    if (typeof name !== "string" || !name) throw new InstanceRequestError(`${byNode ? "node" : "instance"} must be a name`);
    rec.target = name;
    const n = byNode ? [...this.nodes, ...this.spares].find((x) => x.id === name) : [...this.nodes, ...this.spares].find((x) => this.instanceOf(x.id) === name);
    if (!n) throw new InstanceRequestError(`no ${byNode ? "node" : "instance"} ${JSON.stringify(name.slice(0, 64))}`);
    rec.node = n.id;
    if (this.terminated.has(n.id)) {
      if (step === "terminate") return { outcome: "already", detail: `${name} terminated` };
      throw new InstanceRequestError(`${name} (${n.id}) is terminated`);
    }
    switch (step) {
      case "cordon":
        if (this.cordoned.has(n.id)) return { outcome: "already", detail: `${n.id} unschedulable` };
        this.cordoned.add(n.id);
        return { outcome: "applied", detail: `${n.id} unschedulable` };
      case "uncordon":
        if (!this.cordoned.delete(n.id)) return { outcome: "already", detail: `${n.id} schedulable` };
        return { outcome: "applied", detail: `${n.id} schedulable` };
      case "drain":
        return this.drain(n);
      case "restart":
        this.evictions.delete(n.id);
        this.host.enqueue(n, async () => {
          if (n.serving) await n.restartInferencePlanned();
          else await n.startNewPod();
        });
        return { outcome: "applied", detail: `inference server of ${n.id} restarting` };
      case "reboot":
        return this.reboot(n, name);
      case "surge":
        return this.surge(n, name);
      case "terminate":
        return this.terminate(n, name, body.decrement === true);
      default:
        throw new InstanceRequestError(`no step ${JSON.stringify(step.slice(0, 32))}: cordon, uncordon, drain, restart, reboot, surge or terminate`);
    }
  }

  private drain(n: SimNode): LocalRepairReply {
    const e = this.evictions.get(n.id);
    if (e) return e.done ? { outcome: "applied", detail: e.detail } : { outcome: "pending", detail: `the inference pod of ${n.id} is being evicted (preStop: drain file, waiting for its requests)` };
    if (!n.serving) return { outcome: "already", detail: `no inference pod on ${n.id}` };
    const ev = { done: false, detail: "" };
    this.evictions.set(n.id, ev);
    this.host.enqueue(n, async () => {
      try {
        const { preStopMs } = await n.evictInference(30);
        ev.detail = `inference pod of ${n.id} evicted (preStop ${(preStopMs / 1000).toFixed(1)} s)`;
      } catch (err) {
        ev.detail = `eviction of ${n.id}: ${(err as Error).message}`;
      }
      ev.done = true;
    });
    return { outcome: "pending", detail: `evicting the inference pod of ${n.id} (preStop drain)` };
  }

  private reboot(n: SimNode, id: string): LocalRepairReply {
    if (this.rebooting.has(n.id)) return { outcome: "already", detail: `${id} rebooting` };
    if (this.host.powerOf(n.id) === "stopped") throw new InstanceRequestError(`${id} (${n.id}) is stopped`);
    this.rebooting.add(n.id);
    this.host.enqueue(n, async () => {
      try {
        await n.halt(5000);
        // What a reboot heals is gone from the GPUs; the kernel log of the new boot is empty.
        await n.setGpu(afterReboot(n.gpuState));
        await writeFile(n.xidLogPath, "");
        await sleep(this.bootMs);
        this.evictions.delete(n.id);
        if (!this.terminated.has(n.id)) await n.boot();
      } catch (err) {
        this.host.log(`local cloud: reboot of ${n.id}: ${(err as Error).message}`);
      } finally {
        this.rebooting.delete(n.id);
      }
    });
    return { outcome: "applied", detail: `${id} (${n.id}) rebooting (boot ${(this.bootMs / 1000).toFixed(0)} s)` };
  }

  private surge(n: SimNode, id: string): LocalRepairReply {
    const g = this.groupOf(n.az);
    if (g.surged.has(id)) return { outcome: "already", surged: true, detail: `${n.az} already surged for ${id} (desired ${g.desired})` };
    if (g.desired >= g.max) return { outcome: "applied", surged: false, detail: `${n.az} at its max (${g.max}): nothing asked; the group launches the replacement after the termination` };
    g.desired += 1;
    g.surged.set(id, null);
    this.launch(g, id);
    return { outcome: "applied", surged: true, detail: `${n.az} desired ${g.desired - 1}→${g.desired} to replace ${id}` };
  }

  /** One launch attempt for the instance `replaces`: a capacity fault fails it (retried while still wanted), else a spare slot boots. */
  private launch(g: Group, replaces: string): void {
    if (g.failFirst > 0) {
      g.failFirst--;
      const t = this.host.now();
      const fail = setTimeout(() => {
        g.timers.delete(fail);
        const message = this.capacityMessage(g.instanceType, g.az);
        this.launches.push({ t, az: g.az, replaces, node: null, message });
        this.host.log(`local cloud: ${g.az} launch for ${replaces} failed: ${message.slice(0, 90)}…`);
        const retry = setTimeout(() => {
          g.timers.delete(retry);
          if (g.surged.has(replaces) && g.surged.get(replaces) === null) this.launch(g, replaces);
        }, LAUNCH_RETRY_MS - LAUNCH_FAIL_MS);
        g.timers.add(retry);
      }, LAUNCH_FAIL_MS);
      g.timers.add(fail);
      return;
    }
    const taken = new Set([...this.groups.values()].flatMap((x) => [...x.surged.values()]));
    const slot = this.spares.find((s) => s.az === g.az && !taken.has(s.id) && !this.terminated.has(s.id) && this.host.powerOf(s.id) === "stopped");
    if (!slot) {
      this.launches.push({ t: this.host.now(), az: g.az, replaces, node: null, message: `the drill has no free spare slot in ${g.az}` });
      this.host.log(`local cloud: ${g.az} launch for ${replaces}: no free spare slot (the drill's world)`);
      return;
    }
    if (g.surged.has(replaces)) g.surged.set(replaces, slot.id);
    this.launches.push({ t: this.host.now(), az: g.az, replaces, node: slot.id });
    void this.bootFor(slot, `launched to replace ${replaces}`);
  }

  private terminate(n: SimNode, id: string, decrement: boolean): LocalRepairReply {
    const g = this.groupOf(n.az);
    const spare = this.spares.find((s) => s.id === g.surged.get(id)) ?? null;
    const rec: InstanceTermination = { t: this.host.now(), instance: id, node: n.id, replacement: spare?.id ?? null, replacementStatus: null };
    this.terminations.push(rec);
    // What the replacement's agent says at this moment (the report checks capacity came back first).
    if (spare) void spare.agentGet("/readyz").then((r) => (rec.replacementStatus = String(r.body.status)), () => (rec.replacementStatus = "ERR"));
    this.terminated.add(n.id);
    this.cordoned.delete(n.id);
    if (decrement) {
      g.desired = Math.max(0, g.desired - 1);
      g.surged.delete(id);
    } else this.launch(g, id);
    void this.stopFor(n, `${id} terminated`);
    return { outcome: "applied", detail: `${id} (${n.id}) terminated${decrement ? " (desired back by one: the surge took its place)" : " (the group launches its replacement)"}` };
  }

  /** Boots a node as a woken standby node boots: in its AZ's DNS records from the start. */
  private bootFor(n: SimNode, why: string): Promise<void> {
    this.host.setPower(n.id, "starting");
    this.host.log(`local cloud: booting ${n.id} (${why})`);
    return new Promise((resolve) => {
      this.host.enqueue(n, async () => {
        try {
          await this.host.publish(n.az);
          await n.boot();
          if (this.host.powerOf(n.id) === "starting") this.host.setPower(n.id, "running");
        } catch (err) {
          this.host.log(`local cloud: ${n.id} failed to boot: ${(err as Error).message}`);
          await n.halt();
          this.host.setPower(n.id, "stopped");
          await this.host.publish(n.az);
        }
        resolve();
      });
    });
  }

  /** Stops a node as a release does: its processes halted (the agent drains first), then out of DNS. */
  private stopFor(n: SimNode, why: string): Promise<void> {
    this.host.setPower(n.id, "stopping");
    this.host.log(`local cloud: stopping ${n.id} (${why})`);
    return new Promise((resolve) => {
      this.host.enqueue(n, async () => {
        await n.halt(5000).catch(() => undefined);
        if (this.host.powerOf(n.id) === "stopping") this.host.setPower(n.id, "stopped");
        await this.host.publish(n.az);
        resolve();
      });
    });
  }

  private groupOf(az: string): Group {
    const g = this.groups.get(az);
    if (!g) throw new InstanceRequestError(`no group in ${JSON.stringify(az.slice(0, 64))}`);
    return g;
  }
}

