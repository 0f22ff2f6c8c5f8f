/**
 * The local cloud's rollout endpoint (`POST /rollout/switch`): what the drill's rollout actuator
 * (agent/src/fleet/actuators/rollout-local.ts) asks of one simulated node — serve this revision.
 * The node's inference server is restarted as a rolling update of its pod does (the shipped
 * preStop drain, then a new server) with the revision's profile: the fake server's `revision`,
 * `latencyMs`, `corruption`, `continuation`, `corruptedRequests` and a load time (`loadMs`: the
 * server loads that long on every start). A stopped node (a standby scaled to zero) only takes
 * the profile: it boots serving the revision. Without a node, the call is for an AZ as a whole
 * (a promoted rollout's last word: the Deployment's template whatever its replicas): every node
 * of it not on the revision, running ones restarted one after another.
 *
 * Profiles come from the scenario (`setProfiles`: revision → profile). A revision without one is
 * the node's current settings with that revision, except the node's own first revision, which
 * keeps the settings the node started with (a rollback restores them).
 *
 * Desired state: a node serving the revision, or being switched to it, answers `already`. The
 * fencing token in the body is checked here as a real cloud would not, so a deposed leader's late
 * call is seen in the drill: a token below the highest one seen is `refused-stale`. Every call is
 * recorded (drill clock) for the report.
 */
import type { IncomingMessage } from "node:http";
import type { LocalRolloutReply } from "../../agent/src/fleet/actuators/rollout-local";
import type { FakeInferenceProfile } from "../sim/fake-inference";
import type { SimNode } from "../sim/sim-node";
import { InstanceRequestError, type InstanceHost } from "./instance-api";

/** What a revision is, in the drill: the fake server's settings while it serves it. */
export type RevisionProfile = Omit<FakeInferenceProfile, "revision">;

/** One switch call as the cloud received it (drill clock). */
export interface RolloutSwitchRecord {
  t: number;
  node: string;
  revision: string;
  rolloutId: string;
  token: number;
  outcome: LocalRolloutReply["outcome"] | "error";
  detail: string;
}

const REVISION = /^[A-Za-z0-9._:@/+-]{1,128}$/;

export class LocalRollout {
  readonly switches: RolloutSwitchRecord[] = [];
  private profiles = new Map<string, RevisionProfile>();
  /** Node id → the revision a switch under way moves it to. */
  private readonly pending = new Map<string, string>();
  /** Node id → the revision and settings it started with (before its first switch). */
  private readonly first = new Map<string, FakeInferenceProfile>();
  private highest = 0;

  constructor(
    private readonly host: Pick<InstanceHost, "enqueue" | "now" | "log" | "powerOf">,
    private readonly nodes: () => readonly SimNode[],
    private readonly terminated: (nodeId: string) => boolean = () => false,
  ) {}

  /** The scenario's revisions (replacing any given before). */
  setProfiles(profiles: Record<string, RevisionProfile>): void {
    for (const r of Object.keys(profiles)) if (!REVISION.test(r)) throw new InstanceRequestError(`revision ${JSON.stringify(r.slice(0, 64))}: 1-128 letters, digits and ._:@/+-`);
    this.profiles = new Map(Object.entries(profiles));
  }

  /** The revision a node serves, or will once the switch under way is done ("" none reported, as `to` "" in a switch). */
  revisionOf(nodeId: string): string {
    const n = this.nodes().find((x) => x.id === nodeId);
    return this.pending.get(nodeId) ?? n?.opts.inference?.revision ?? "";
  }

  /** Whether a switch of the node is under way (its server not yet restarted on the revision `revisionOf` names). */
  switching(nodeId: string): boolean {
    return this.pending.has(nodeId);
  }

  /** The highest fencing token seen (between scenarios a drill starts again at 0 with `reset`). */
  reset(): void {
    this.highest = 0;
  }

  /** One switch: validates, answers at once, restarts in the background; a bad request throws `InstanceRequestError` (400). */
  answer(body: Record<string, unknown>): LocalRolloutReply {
    const token = body.token;
    const rec: RolloutSwitchRecord = {
      t: this.host.now(), node: String(body.node ?? "?").slice(0, 64), revision: String(body.revision ?? "").slice(0, 128), rolloutId: String(body.rolloutId ?? "").slice(0, 128),
      token: typeof token === "number" ? token : -1, outcome: "error", detail: "",
    };
    try {
      const reply = this.act(body, rec);
      rec.outcome = reply.outcome;
      rec.detail = reply.detail;
      return reply;
    } catch (err) {
      rec.detail = (err as Error).message;
      throw err;
    } finally {
      this.switches.push(rec);
      if (rec.outcome !== "already") this.host.log(`local cloud: rollout ${rec.rolloutId} switch ${rec.node} to ${rec.revision} → ${rec.outcome} (${rec.detail}; token ${rec.token})`);
    }
  }

  private act(body: Record<string, unknown>, rec: RolloutSwitchRecord): LocalRolloutReply {
    const whole = body.node === undefined && typeof body.az === "string";
    if (!whole && (typeof body.node !== "string" || !body.node)) throw new InstanceRequestError("node must be a name (or leave it out, with az, for the AZ as a whole)");
    // "": no revision reported (a fleet whose servers never told one: what a rollback from the first rollout restores).
    if (typeof body.revision !== "string" || (body.revision !== "" && !REVISION.test(body.revision))) throw new InstanceRequestError("revision must be 1-128 letters, digits and ._:@/+- (or empty: none reported)");
    if (typeof body.token !== "number" || !Number.isInteger(body.token) || body.token < 0) throw new InstanceRequestError("token must be an integer >= 0 (the leader's fencing token)");
    if (body.token < this.highest) return { outcome: "refused-stale", detail: `token ${body.token} is older than ${this.highest}, already acted on: a leader that lost its term` };
    this.highest = body.token;
    const to = body.revision;
    if (whole) return this.actAz(String(body.az), to, rec);
    const n = this.nodes().find((x) => x.id === body.node);
    if (!n) throw new InstanceRequestError(`no node ${JSON.stringify(String(body.node).slice(0, 64))}`);
    if (this.terminated(n.id)) throw new InstanceRequestError(`${n.id} is terminated`);
    rec.node = n.id;
    return this.switchNode(n, to).reply;
  }

  /**
   * A promoted rollout's AZ as a whole (the Deployment's template, whatever its replicas): every
   * node of it not on `to`; a stopped one boots on it, running ones restart on it one after another
   * (a rolling update's one pod at a time).
   */
  private actAz(az: string, to: string, rec: RolloutSwitchRecord): LocalRolloutReply {
    rec.node = `az:${az.slice(0, 60)}`;
    const nodes = this.nodes().filter((n) => n.az === az && !this.terminated(n.id));
    if (!nodes.length) throw new InstanceRequestError(`no node in ${JSON.stringify(az.slice(0, 64))}`);
    let after: Promise<void> = Promise.resolve();
    const moved: string[] = [];
    for (const n of nodes) {
      const r = this.switchNode(n, to, after);
      after = r.done;
      if (r.reply.outcome === "applied") moved.push(n.id);
    }
    if (!moved.length) return { outcome: "already", detail: `every node of ${az} serves ${to} or is switching to it` };
    return { outcome: "applied", detail: `${az} as a whole on ${to}: ${moved.join(",")}` };
  }

  /** One node to `to`: its settings now, its server restarted (after `after`) unless it is stopped. */
  private switchNode(n: SimNode, to: string, after: Promise<void> = Promise.resolve()): { reply: LocalRolloutReply; done: Promise<void> } {
    const done = (reply: LocalRolloutReply, p: Promise<void> = after) => ({ reply, done: p });
    if (this.revisionOf(n.id) === to) return done({ outcome: "already", detail: `${n.id} ${this.pending.has(n.id) ? "switching to" : "serves"} ${to}` });
    const current = n.opts.inference ?? {};
    if (!this.first.has(n.id)) this.first.set(n.id, { ...current });
    const start = this.first.get(n.id)!;
    const profile = this.profiles.get(to);
    // A scenario's profile; the node's own first revision as it started; else what it runs now, under the new name.
    const settings: FakeInferenceProfile = profile ? { ...profile, revision: to } : (start.revision ?? "") === to ? { ...start } : { ...current, revision: to || undefined };
    n.opts.inference = settings;
    const load = settings.loadMs ? `, loading ${(settings.loadMs / 1000).toFixed(1)} s` : "";
    // Stopped, stopping or booting: its next boot starts the server with these settings (a restart now would start one on a node going down).
    const power = this.host.powerOf(n.id);
    if (power !== "running") return done({ outcome: "applied", detail: `${n.id} is ${power}: it boots serving ${to}` });
    this.pending.set(n.id, to);
    let restarted!: () => void;
    const ended = new Promise<void>((resolve) => (restarted = resolve));
    this.host.enqueue(n, async () => {
      try {
        await after;
        if (n.serving) await n.restartInferencePlanned();
        else await n.startInference(n.opts.mode ?? "ready");
      } catch (err) {
        this.host.log(`local cloud: rollout switch of ${n.id} to ${to}: ${(err as Error).message}`);
      } finally {
        if (this.pending.get(n.id) === to) this.pending.delete(n.id);
        restarted();
      }
    });
    return done({ outcome: "applied", detail: `inference server of ${n.id} restarting with ${to}${load}` }, ended);
  }
}

/** `POST /rollout/switch` on the local cloud's port; a bad request is a 400 naming it. */
export async function rolloutStep(rollout: LocalRollout, req: IncomingMessage, send: (code: number, body: object) => void): Promise<void> {
  try {
    let raw = "";
    for await (const chunk of req) raw += String(chunk);
    send(200, rollout.answer(JSON.parse(raw || "{}") as Record<string, unknown>));
  } catch (err) {
    send(err instanceof InstanceRequestError || err instanceof SyntaxError ? 400 : 500, { error: (err as Error).message });
  }
}
