/**
 * The drill's stand-in for the cloud APIs the leader calls (`LLMHA_ACTUATOR=local`), on
 * loopback HTTP. The drill process owns the simulated nodes and the AZ proxies; the agents
 * are child processes, so their actuator reaches them here:
 *
 * | request                          | what it does                                                   | AWS equivalent |
 * |----------------------------------|----------------------------------------------------------------|----------------|
 * | `GET /standby/groups?az=`        | the AZ's node groups in fallback order, with their launches (woken, in service, pending, failed) | DescribeAutoScalingGroups + DescribeScalingActivities |
 * | `POST /standby/wake {az, group?}` | wakes one node group (default the AZ's first): boots the AZ's stopped nodes (inference server + agent); each is in the AZ's DNS records from its boot — unless the group has a capacity fault, then the launch fails as Auto Scaling's does | Auto Scaling min/desired raised |
 * | `POST /standby/release {az}`     | stops its running nodes (SIGTERM: agents drain, leave Redis), then drops them from DNS | group handed back to the scale-to-zero schedule |
 * | `POST /shift/start {az, expiresInMs}` | every AZ proxy puts the AZ's servers in MAINT (`set server … state maint`); lifted by itself at expiry | ARC zonal shift on the NLBs |
 * | `POST /shift/cancel {az}`        | those servers back to `ready`                                  | cancel the zonal shift |
 * | `GET /openid/v1/jwks`, `GET /api/v1/nodes` | the Kubernetes API the leader reads: the issuer's keys and the GPU Nodes (`kube`, local-kube.ts) | the API server |
 * | `POST /instances/<step>`        | the repair ladder's steps on the simulated instances (`instances`, local-instances.ts) | Kubernetes API, EC2, Auto Scaling |
 * | `POST /rollout/switch`          | a node's inference server restarted serving a revision, with its profile (`rollout`, local-rollout.ts) | the inference Deployment's new template |
 * | `/experimentTemplates`, `/experiments` | the game day's FIS experiments on the drill's own faults (`fis`, local-fis.ts; off until `enableFis`) | AWS FIS |
 * | `/apis/karpenter.sh/v1/…`, `…/deployments/NAME/scale` | NodePools, NodeClaims, the placeholder's scale (`karpenter`, local-karpenter.ts) | Karpenter on EKS |
 *
 * Node groups: by default one per AZ, named as the AZ. `defineGroups` gives an AZ several
 * (instance types, in fallback order; every group boots the AZ's nodes: the simulated
 * hardware is the same), and `capacityFault(group, n)` makes the group's first `n` launch
 * attempts fail with AWS's message (`We currently do not have sufficient <type> capacity in
 * the Availability Zone you requested (<az>)…`), recorded like a failed scaling activity
 * 1 s after the attempt; a woken group retries every 10 s, as Auto Scaling does. A group may
 * own some of the AZ's nodes only (`nodes`: its instances; other groups boot the others), and
 * `badGpuFault(group)` makes it boot them onto lost GPUs (the sim node's `gpuLost`): the
 * launch succeeds, the instances are in service, their agents report the lost GPU.
 *
 * Desired state: asking for what already holds answers `already`. Answers come at once (the
 * boot goes on in the background), as a cloud API's do. The token and reason in the body are
 * logged, never checked: fencing happened in the agent's `FencedActuator`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { LocalFis } from "./local-fis";
import { LocalKubeApi } from "./local-kube";
import { instanceStep, LocalInstances } from "./local-instances";
import { LocalRollout, rolloutStep } from "./local-rollout";
import { karpenterStep, LocalKarpenter } from "./local-karpenter";
import { LocalZonalShift, type CloudProxy } from "./local-shift";
import type { AddressInfo } from "node:net";
import type { LocalCloudReply, LocalGroupsReply } from "../../agent/src/fleet/actuators/local";
import type { StateActionName as ActionName } from "../../agent/src/fleet/actuators/types";
import type { SimNode } from "../sim/sim-node";
import { capacityMessage, LAUNCH_FAIL_MS, LAUNCH_RETRY_MS, type CloudAction, type CloudGroup, type CloudLaunchFailure, type NodePower } from "./local-cloud-types";

export { capacityMessage, LAUNCH_FAIL_MS, LAUNCH_RETRY_MS, type CloudAction, type CloudGroup, type CloudLaunchFailure, type NodePower } from "./local-cloud-types";

export interface LocalCloudOptions {
  /** Drill clock for the action log. */
  now(): number;
  /** Progress lines. */
  log?(line: string): void;
}

export class LocalCloudRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LocalCloudRequestError";
  }
}

export type { CloudProxy };

export class LocalCloud {
  readonly actions: CloudAction[] = [];
  /** Every failed launch (capacity faults), in order. */
  readonly launchFailures: CloudLaunchFailure[] = [];
  /** AZ → its node groups in fallback order (absent: one group named as the AZ). */
  private readonly groups = new Map<string, CloudGroup[]>();
  private server: Server | null = null;
  private nodes: SimNode[] = [];
  private proxies: () => CloudProxy[] = () => [];
  private endpoints: (az: string) => Promise<void> = async () => undefined;
  private readonly power = new Map<string, NodePower>();
  /** One operation at a time per node: a release waits for the boot it follows. */
  private readonly chain = new Map<string, Promise<void>>();
  /** Zonal shifts on the AZ proxies (local-shift.ts). */
  private readonly shifts = new LocalZonalShift(() => this.proxies(), (line) => this.o.log?.(line));
  private port = 0;
  /** The Kubernetes API it also serves: the inventory's Nodes (a node exists unless stopped) and the token issuer. */
  readonly kube = new LocalKubeApi(
    () => this.url,
    (n) => (this.power.has(n.id) ? this.powerOf(n.id) !== "stopped" : n.running),
    (n) => ({ instanceId: this.instances.instanceOf(n.id), unschedulable: this.instances.isCordoned(n.id) }),
  );
  /** The instances the repair ladder acts on (spare slots, reboots, surges); attached by the drill's stack. */
  readonly instances = new LocalInstances(
    {
      powerOf: (id) => this.powerOf(id), setPower: (id, p) => void this.power.set(id, p), enqueue: (n, op) => this.enqueue(n, op),
      publish: (az) => this.publish(az), now: () => this.o.now(), log: (line) => this.o.log?.(line),
    },
    capacityMessage,
  );

  /** The simulated Karpenter (local-karpenter.ts): NodePools, NodeClaims and the placeholder, for the Karpenter engine. */
  readonly karpenter = new LocalKarpenter<SimNode>({
    nodesIn: (az) => this.nodes.filter((n) => n.az === az), isStopped: (n) => this.powerOf(n.id) === "stopped", running: (n) => this.powerOf(n.id) === "running",
    boot: (n) => this.bootNode(n), halt: (n) => this.haltNode(n), now: () => this.o.now(), log: (line) => this.o.log?.(line), capacityMessage,
  });

  /** The rollout's switches on the simulated nodes; a scenario gives it the revisions' profiles (`setProfiles`). */
  readonly rollout = new LocalRollout({ powerOf: (id) => this.powerOf(id), enqueue: (n, op) => this.enqueue(n, op), now: () => this.o.now(), log: (line) => this.o.log?.(line) },
    () => [...new Set([...this.nodes, ...this.instances.all()])], (id) => this.instances.isTerminated(id));

  /** AWS FIS for `llm-ha gameday --local` (local-fis.ts); null until `enableFis`. */
  fis: LocalFis | null = null;

  constructor(private readonly o: LocalCloudOptions) {}

  /** Answers FIS calls from now on, holding each experiment's fault for `holdMs`. */
  enableFis(o: ConstructorParameters<typeof LocalFis>[0]): LocalFis {
    this.fis = new LocalFis({ log: (line) => this.o.log?.(line), ...o });
    return this.fis;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens on a free loopback port (before the nodes exist: their agents need the URL). */
  async listen(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /**
   * The nodes it powers (stopped ones are `stopped`), the AZ proxies a shift acts on, and
   * `endpoints`, called when an AZ's set of existing nodes changed (publishes its headless
   * Service's records: a booting node is in it, a halted one is not).
   */
  attach(nodes: SimNode[], proxies: () => CloudProxy[], endpoints?: (az: string) => Promise<void>): void {
    this.nodes = nodes;
    this.proxies = proxies;
    if (endpoints) this.endpoints = endpoints;
    for (const n of nodes) this.power.set(n.id, n.running ? "running" : "stopped");
  }

  /** Gives `az` these node groups (instance types), in fallback order; `[]` restores the default single group. */
  defineGroups(az: string, groups: { name: string; instanceType: string; nodes?: string[] }[]): void {
    for (const g of this.groups.get(az) ?? []) if (g.timer) clearTimeout(g.timer);
    if (groups.length === 0) this.groups.delete(az);
    else this.groups.set(az, groups.map((g) => ({ ...g, az, failFirst: 0, woken: false, wokenAt: null, launched: false, failures: [], timer: null })));
  }

  /** The group's first `n` launch attempts fail with AWS's capacity message (0 lifts the fault). */
  capacityFault(group: string, n: number): void {
    const g = [...this.groups.values()].flat().find((x) => x.name === group);
    if (!g) throw new LocalCloudRequestError(`no node group ${group}`);
    g.failFirst = n;
  }

  /** The group's launches boot its nodes onto lost GPUs (`false` lifts the fault; the nodes' GPUs are the scenario's to heal). */
  badGpuFault(group: string, on = true): void {
    const g = [...this.groups.values()].flat().find((x) => x.name === group);
    if (!g) throw new LocalCloudRequestError(`no node group ${group}`);
    g.badGpus = on;
  }

  /** The nodes a group's launches boot: its own, else every node of its AZ. */
  private nodesOf(g: CloudGroup): SimNode[] {
    return this.nodes.filter((n) => n.az === g.az && (!g.nodes || g.nodes.includes(n.id)));
  }

  /** The AZ's node groups (the default single one created on first use). */
  groupsOf(az: string): CloudGroup[] {
    let gs = this.groups.get(az);
    if (!gs) {
      gs = [{ name: az, az, instanceType: "p4d.24xlarge", failFirst: 0, woken: false, wokenAt: null, launched: false, failures: [], timer: null }];
      this.groups.set(az, gs);
    }
    return gs;
  }

  powerOf(id: string): NodePower {
    return this.power.get(id) ?? "stopped";
  }

  /** Resolves when no node of the AZ is booting or stopping. */
  async settled(az: string): Promise<void> {
    await Promise.all(this.nodes.filter((n) => n.az === az).map((n) => this.chain.get(n.id)));
  }

  async stop(): Promise<void> {
    for (const g of [...this.groups.values()].flat()) if (g.timer) clearTimeout(g.timer);
    this.karpenter.stop();
    this.instances.stop();
    this.shifts.stop();
    await this.fis?.stop();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((r) => server.close(() => r()));
    await Promise.allSettled([...this.chain.values()]);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const send = (code: number, body: object): void => {
      res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));
    };
    const routes: Record<string, ActionName> = {
      "/standby/wake": "standby.wake",
      "/standby/release": "standby.release",
      "/shift/start": "shift.start",
      "/shift/cancel": "shift.cancel",
    };
    const kube = req.method === "GET" ? this.kube.answer((req.url ?? "").split("?")[0]) : null;
    if (kube) return send(kube.code, kube.body);
    if ((req.url ?? "").startsWith("/apis/")) return karpenterStep(this.karpenter, req, send);
    if (req.method === "POST" && (req.url ?? "").startsWith("/instances/")) return instanceStep(this.instances, req, send);
    if (req.method === "POST" && req.url === "/rollout/switch") return rolloutStep(this.rollout, req, send);
    const fis = this.fis ? await this.fis.answer(req) : null;
    if (fis) return send(fis.code, fis.body);
    if (req.method === "GET" && (req.url ?? "").startsWith("/standby/groups")) {
      const az = new URL(req.url ?? "", "http://x").searchParams.get("az") ?? "";
      if (!this.nodes.some((n) => n.az === az)) return send(this.nodes.length ? 400 : 503, { error: `no nodes in AZ ${JSON.stringify(az)}` });
      return send(200, this.view(az));
    }
    const action = req.method === "POST" ? routes[req.url ?? ""] : undefined;
    if (!action) return send(404, { error: "GET /standby/groups?az=, POST /standby/wake, /standby/release, /shift/start, /shift/cancel, /instances/<step> or /rollout/switch" });
    let body: { az?: unknown; token?: unknown; reason?: unknown; expiresInMs?: unknown; group?: unknown };
    try {
      let raw = "";
      for await (const chunk of req) raw += String(chunk);
      body = JSON.parse(raw) as typeof body;
    } catch {
      return send(400, { error: "body must be JSON" });
    }
    const az = typeof body.az === "string" ? body.az : "";
    const rec: CloudAction = {
      t: this.o.now(), action, az, token: Number(body.token ?? 0), reason: String(body.reason ?? ""), outcome: "error", detail: "",
    };
    try {
      // Agents can act before the drill has started every node: a 503 is a failed call, retried.
      if (this.nodes.length === 0) throw new Error("local cloud not ready: the drill is still starting its nodes");
      if (!this.nodes.some((n) => n.az === az)) throw new LocalCloudRequestError(`no nodes in AZ ${JSON.stringify(az)}`);
      let reply: LocalCloudReply;
      switch (action) {
        case "standby.wake":
          rec.group = typeof body.group === "string" ? body.group : undefined;
          reply = this.wakeGroup(az, rec.group);
          break;
        case "standby.release":
          reply = this.release(az);
          break;
        case "shift.start":
          if (!(Number(body.expiresInMs) > 0)) throw new LocalCloudRequestError("expiresInMs must be > 0");
          reply = await this.shifts.start(az, Number(body.expiresInMs));
          break;
        case "shift.cancel":
          reply = await this.shifts.cancel(az);
          break;
      }
      rec.outcome = reply.outcome;
      rec.detail = reply.detail;
      send(200, reply);
    } catch (err) {
      rec.detail = (err as Error).message;
      send(err instanceof LocalCloudRequestError ? 400 : 500, { error: rec.detail });
    } finally {
      this.actions.push(rec);
      if (rec.outcome !== "already") this.o.log?.(`local cloud: ${action} ${az} → ${rec.outcome} (${rec.detail}; token ${rec.token})`);
    }
  }

  private enqueue(n: SimNode, op: () => Promise<void>): void {
    const next = (this.chain.get(n.id) ?? Promise.resolve()).then(op);
    this.chain.set(n.id, next.catch(() => undefined));
  }

  /** What `GET /standby/groups` answers: the groups as the wake follow reads them. */
  private view(az: string): LocalGroupsReply {
    const count = (g: CloudGroup, p: NodePower): number => this.nodesOf(g).filter((n) => this.powerOf(n.id) === p).length;
    return {
      steps: this.groupsOf(az).map((g) => [
        { name: g.name, woken: g.woken, wokenAt: g.wokenAt, inService: g.launched ? count(g, "running") : 0, pending: g.launched ? count(g, "starting") : 0, failures: [...g.failures] },
      ]),
    };
  }

  /** Wakes one node group: a launch attempt, which a capacity fault fails (then retried every 10 s while woken). */
  private wakeGroup(az: string, name?: string): LocalCloudReply {
    const gs = this.groupsOf(az);
    const g = name === undefined ? gs[0] : gs.find((x) => x.name === name);
    if (!g) throw new LocalCloudRequestError(`no node group ${JSON.stringify(name)} in ${az}`);
    if (g.woken) {
      // Re-asserted: a group that launched and whose nodes were stopped since boots them again.
      if (g.launched) {
        const r = this.wake(g);
        return r.outcome === "applied" ? r : { outcome: "already", detail: `${g.name}: woken${g.failures.length ? `, ${g.failures.length} failed launches` : ""}` };
      }
      return { outcome: "already", detail: `${g.name} (${g.instanceType}): woken, launching` };
    }
    g.woken = true;
    g.wokenAt = Date.now();
    g.failures = [];
    const launched = this.attempt(g);
    return { outcome: "applied", detail: `${g.name} (${g.instanceType}): desired 0→1${launched ? `, ${launched.detail}` : ""}` };
  }

  /** One launch attempt: the boot's reply when it launched, null when it fails (recorded later). */
  private attempt(g: CloudGroup): LocalCloudReply | null {
    if (!g.woken) return null;
    if (g.failFirst > 0) {
      g.failFirst--;
      const t = this.o.now();
      const at = Date.now();
      g.timer = setTimeout(() => {
        if (!g.woken) return;
        const message = capacityMessage(g.instanceType, g.az);
        g.failures.push({ at, message });
        this.launchFailures.push({ t, group: g.name, message });
        this.o.log?.(`local cloud: ${g.name} launch failed: ${message.slice(0, 90)}…`);
        g.timer = setTimeout(() => this.attempt(g), LAUNCH_RETRY_MS - LAUNCH_FAIL_MS);
        g.timer.unref();
      }, LAUNCH_FAIL_MS);
      g.timer.unref();
      return null;
    }
    g.launched = true;
    return this.wake(g);
  }

  private wake(g: CloudGroup): LocalCloudReply {
    const off = this.nodesOf(g).filter((n) => this.powerOf(n.id) === "stopped" || this.powerOf(n.id) === "stopping");
    if (off.length === 0) return { outcome: "already", detail: `${g.az}: every node running or starting` };
    for (const n of off) this.bootNode(n, g.badGpus);
    return { outcome: "applied", detail: `${g.az}: booting ${off.map((n) => n.id).join(",")}` };
  }

  /** Boots one node (in DNS from its boot); a failed boot leaves it stopped: the leader's next re-assertion starts it again. */
  private bootNode(n: SimNode, badGpus?: boolean): void {
    this.power.set(n.id, "starting");
    this.enqueue(n, async () => {
      try {
        await this.publish(n.az);
        if (badGpus) await n.gpuFault("gpuLost");
        await n.boot();
        if (this.power.get(n.id) === "starting") this.power.set(n.id, "running");
      } catch (err) {
        this.o.log?.(`local cloud: ${n.id} failed to boot: ${(err as Error).message}`);
        await n.halt();
        this.power.set(n.id, "stopped");
        await this.publish(n.az);
      }
    });
  }

  /** Stops one node (SIGTERM: its agent drains and leaves Redis), then drops it from DNS. */
  private haltNode(n: SimNode): void {
    this.power.set(n.id, "stopping");
    this.enqueue(n, async () => {
      await n.halt();
      if (this.power.get(n.id) === "stopping") this.power.set(n.id, "stopped");
      await this.publish(n.az);
    });
  }

  /** The AZ's woken nodes stopped and its groups handed back, as a release does, outside any leader's call (the drill's own reset). */
  standDown(az: string): void {
    this.release(az);
  }

  private release(az: string): LocalCloudReply {
    // Every group of the AZ back to the schedule (their launches stop).
    for (const g of this.groupsOf(az)) {
      if (g.timer) clearTimeout(g.timer);
      Object.assign(g, { woken: false, wokenAt: null, launched: false, failures: [], timer: null });
    }
    const on = this.nodes.filter((n) => n.az === az && (this.powerOf(n.id) === "running" || this.powerOf(n.id) === "starting"));
    if (on.length === 0) return { outcome: "already", detail: `${az}: every node stopped` };
    for (const n of on) this.haltNode(n);
    return { outcome: "applied", detail: `${az}: stopping ${on.map((n) => n.id).join(",")}` };
  }

  /** Publishes the AZ's node records; a failure is logged (the next change publishes again). */
  private async publish(az: string): Promise<void> {
    await this.endpoints(az).catch((err: unknown) => this.o.log?.(`local cloud: DNS records of ${az}: ${(err as Error).message}`));
  }
}
