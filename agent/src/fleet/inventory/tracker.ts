/**
 * The leader's hold on the inventory: the last list (re-read every `refreshMs`, and at once
 * when something claims to be a node the list lacks: a node booting since), what it has seen
 * of each node (served, GPUs) kept in its own fenced hash `inventory` so the next leader
 * starts from it, and the AZs' available sets and the `members` index kept free of ids the
 * inventory does not place there (what a gateway routes to, what `llm-ha status` lists).
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../util/log";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import { InventoryError, type Inventory, type InventoryNode } from "./inventory";
import { readInventorySnapshot, type InventorySnapshot } from "./read";
import type { EnrolmentDesk } from "../identity/desk";

/** How often the list is re-read without a reason to. */
export const INVENTORY_REFRESH_MS = 10_000;
/** The soonest a re-read is forced again by an id the list lacks (a forgery persists: not a list a period). */
const FORCED_REFRESH_MS = 2000;

export class InventoryTracker {
  private nodes: InventoryNode[] | null = null;
  private listedAt = 0;
  /** When the last list that answered was asked for. */
  private okListedAt = 0;
  /**
   * Ids seen claiming to be nodes the list lacked, with when first seen. One is judged forged only
   * against a list asked for after that (a node that booted since the last list is no forgery);
   * until then it is left out, neither counted nor removed.
   */
  private readonly pending = new Map<string, number>();
  private failing = false;
  private readonly formerly = new Set<string>();
  private readonly azsSeen = new Set<string>();
  private seeded = false;
  private readonly served = new Set<string>();
  private readonly gpus = new Map<string, number>();
  /** The `inventory` hash's fields as this term last wrote (or, at its start, read) them: only what changed is written. */
  private written = new Map<string, string>();

  constructor(
    private readonly inventory: Inventory,
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly log: Logger,
    private readonly refreshMs = INVENTORY_REFRESH_MS,
    /** Node identities: records are read only under each enrolled node's capability key. */
    private readonly desk: EnrolmentDesk | null = null,
  ) {}

  /** Whether records are read under capability keys (then the sweep, which looks at `node:<id>`, must not run). */
  get identities(): boolean {
    return this.desk !== null;
  }

  /** The key the leader reads a node's record under (null: not enrolled). */
  recordKey(nodeId: string): string | null {
    return this.desk ? this.desk.recordKey(nodeId) : this.keys.node(nodeId);
  }

  /** The last list (null before the first one answered). */
  get current(): readonly InventoryNode[] | null {
    return this.nodes;
  }

  /** Canary voters: the listed nodes in their AZs (null before the first list). */
  voters(): { nodes: ReadonlyMap<string, string>; formerly: ReadonlySet<string>; recordKey?: (id: string) => string | null } | null {
    if (!this.nodes) return null;
    // Ids not judged yet (seen after the last list: a node booting) are no vote but not named as forged either.
    const unjudged = [...this.pending].filter(([, at]) => at > this.okListedAt).map(([id]) => id);
    return {
      nodes: new Map(this.nodes.map((n) => [n.nodeId, n.az])),
      formerly: new Set([...this.formerly, ...unjudged]),
      ...(this.desk ? { recordKey: (id: string) => this.recordKey(id) } : {}),
    };
  }

  /** At the start of a term: what the previous leader saw (served, GPU counts), from its fenced hash. */
  /**
   * What a new leader starts from: the capabilities handed out and what the last leader saw of each
   * node. A read that fails throws and leaves the tracker unseeded: without the capabilities no
   * record can be found, and an evaluation then would read every node as gone (every AZ DOWN, seen
   * when a new leader took over on a Redis endpoint still flapping after a failover). `snapshot`
   * seeds again first, so a period decides nothing until the seed has been read.
   */
  async seed(): Promise<void> {
    this.seeded = false;
    this.written = new Map(); // another leader may have written it since this process last led
    await this.desk?.load();
    const h = await this.redis.hgetall(this.keys.inventory);
    for (const [id, v] of Object.entries(h)) {
      const [az, gpus, served] = v.split("|");
      if (!az || ["token", "leader", "at"].includes(id)) continue;
      this.written.set(id, v);
      this.formerly.add(id);
      this.azsSeen.add(az);
      if (served === "1") this.served.add(id);
      const g = Number(gpus);
      if (Number.isInteger(g) && g > 0) this.gpus.set(id, g);
    }
    this.seeded = true;
  }

  /** The AZs of the nodes the last leader saw (its `inventory` hash) and of the last list: never what agents write. */
  knownAzs(): string[] {
    for (const n of this.nodes ?? []) this.azsSeen.add(n.az);
    return [...this.azsSeen];
  }

  private async refresh(now: number, force: boolean): Promise<void> {
    if (this.nodes && !force && now - this.listedAt < this.refreshMs) return;
    try {
      const list = await this.inventory.list();
      // A selector that matches nothing (a label renamed) must not read as every node gone: an
      // empty fleet would be every AZ down, a global outage declared and the standby woken.
      if (list.length === 0) throw new InventoryError("the inventory lists no GPU node: refusing an empty fleet (check the label selector, LLMHA_INVENTORY_SELECTOR)");
      const before = new Set((this.nodes ?? []).map((n) => n.nodeId));
      const added = list.filter((n) => !before.has(n.nodeId)).map((n) => n.nodeId);
      const after = new Set(list.map((n) => n.nodeId));
      const removed = [...before].filter((id) => !after.has(id));
      if (this.nodes === null || this.failing || added.length || removed.length) {
        this.log.info({ source: this.inventory.source, nodes: list.length, azs: [...new Set(list.map((n) => n.az))].sort(), added: added.slice(0, 20), removed: removed.slice(0, 20) }, "inventory");
      }
      for (const n of list) this.formerly.add(n.nodeId);
      this.nodes = list;
      this.listedAt = now;
      this.okListedAt = now;
      this.failing = false;
    } catch (err) {
      if (this.nodes === null) throw new InventoryError(`no inventory yet from ${this.inventory.source}: ${(err as Error).message}`);
      if (!this.failing) this.log.warn({ source: this.inventory.source, err: (err as Error).message }, "inventory list failed; keeping the last one");
      this.failing = true;
      this.listedAt = now; // retried after refreshMs, not every period
    }
  }

  /** One period's registry view: the inventory's nodes with their records; forgeries named, stray ids out of the available sets and `members`. */
  async snapshot(writer: FencedWriter, now: number): Promise<InventorySnapshot> {
    if (!this.seeded) await this.seed();
    await this.refresh(now, false);
    if (this.desk) {
      const ids = (): Set<string> => new Set((this.nodes ?? []).map((n) => n.nodeId));
      const r = await this.desk.process(ids(), writer);
      // A request from a node the list lacks: a node that booted since; list again (rate-limited) and judge it.
      if (r.waiting && now - this.listedAt >= FORCED_REFRESH_MS) {
        await this.refresh(now, true);
        await this.desk.process(ids(), writer);
      }
    }
    const read = (): Promise<InventorySnapshot> =>
      readInventorySnapshot(this.redis, this.keys, this.nodes ?? [], { served: this.served, formerly: this.formerly, gpusOf: this.gpus, recordKey: (id) => this.recordKey(id) });
    let snap = await read();
    let strays = await this.availableStrays();
    const claimed = [...snap.offInventory, ...strays.filter((x) => !this.formerly.has(x.id)).map((x) => x.id)];
    for (const id of claimed) if (!this.pending.has(id)) this.pending.set(id, now);
    // An id first seen after the last list: ask again (at most every FORCED_REFRESH_MS) before judging it.
    if (claimed.some((id) => this.pending.get(id)! > this.okListedAt) && now - this.listedAt >= FORCED_REFRESH_MS) {
      await this.refresh(now, true);
      snap = await read();
      strays = await this.availableStrays();
    }
    const judged = (id: string): boolean => (this.pending.get(id) ?? Infinity) <= this.okListedAt;
    const listed = new Set((this.nodes ?? []).map((n) => n.nodeId));
    // Left out either way (not in the inventory); named as forged only once judged.
    snap.skipped = (snap.skipped ?? []).filter((x) => x.what !== "forged" || listed.has(x.nodeId) || judged(x.nodeId));
    const forgedMembers = snap.offInventory.filter(judged);
    snap.offInventory = forgedMembers;
    for (const id of [...this.pending.keys()]) if (listed.has(id) || !claimed.includes(id)) this.pending.delete(id);
    for (const n of snap.nodes) {
      if (n.takesTraffic) this.served.add(n.nodeId);
      if (n.gpusExpected > 0) this.gpus.set(n.nodeId, n.gpusExpected);
    }
    // With identities the sweep does not run: a dead node leaves its AZ's available set here.
    const dead = this.desk ? snap.nodes.filter((n) => !n.alive).map((n) => ({ az: n.az, id: n.nodeId })) : [];
    if (dead.length) {
      const p = this.redis.pipeline();
      for (const x of dead) p.zrem(this.keys.azAvailable(x.az), x.id);
      await p.exec();
    }
    // Out of the available sets: former nodes' leftovers and judged forgeries (a gateway would route to them).
    // (A listed node in another AZ's set is out at once: the inventory says where each node is.)
    const drop = strays.filter((x) => listed.has(x.id) || this.formerly.has(x.id) || judged(x.id));
    if (drop.length) {
      const p = this.redis.pipeline();
      for (const x of drop) p.zrem(this.keys.azAvailable(x.az), x.id);
      await p.exec();
      for (const x of drop) {
        if (listed.has(x.id) || !this.formerly.has(x.id)) (snap.skipped ??= []).push({ nodeId: x.id.slice(0, 64), reason: `in ${x.az}'s available set, which the inventory does not place it in`, what: "forged" });
      }
    }
    // Forged member entries would be named every period: out of the index (`llm-ha status` reads it too).
    if (forgedMembers.length) await this.redis.hdel(this.keys.members, ...forgedMembers);
    await this.writeSeen(writer);
    return snap;
  }

  /**
   * The fenced `inventory` hash (what the next leader starts from, what `llm-ha status` lists):
   * only the fields that changed since the last write, merged; the whole hash replaced only
   * when a node left the list (or another leader's hash holds ids this list lacks). Written
   * whole every time it changed, one served flag cost the fleet's every field in one call (and
   * above 253 nodes the call exceeded the function's argument bound: every period failed).
   */
  private async writeSeen(writer: FencedWriter): Promise<void> {
    const fields: Record<string, string> = {};
    for (const n of this.nodes ?? []) fields[n.nodeId] = `${n.az}|${this.gpus.get(n.nodeId) ?? 0}|${this.served.has(n.nodeId) ? 1 : 0}`;
    const ids = Object.keys(fields);
    if (ids.length === 0) return;
    const gone = [...this.written.keys()].some((id) => !(id in fields));
    const changed: Record<string, string> = {};
    for (const id of ids) if (this.written.get(id) !== fields[id]) changed[id] = fields[id];
    if (!gone && Object.keys(changed).length === 0) return;
    const write = gone ? fields : changed;
    const r = await writer.hset(this.keys.inventory, write, { mode: gone ? "replace" : "hset" });
    if (!r.accepted) return;
    if (gone) this.written = new Map(Object.entries(fields));
    else for (const [id, v] of Object.entries(changed)) this.written.set(id, v);
  }

  /** Ids in an inventory AZ's available set that the inventory does not place in that AZ. */
  private async availableStrays(): Promise<{ az: string; id: string }[]> {
    const byAz = new Map<string, Set<string>>();
    for (const n of this.nodes ?? []) {
      if (!byAz.has(n.az)) byAz.set(n.az, new Set());
      byAz.get(n.az)!.add(n.nodeId);
    }
    const azs = [...byAz.keys()];
    if (azs.length === 0) return [];
    const pipe = this.redis.pipeline();
    for (const az of azs) pipe.zrangebyscore(this.keys.azAvailable(az), "-inf", "+inf");
    const got = (await pipe.exec()) ?? [];
    const out: { az: string; id: string }[] = [];
    azs.forEach((az, i) => {
      for (const id of (got[i]?.[1] ?? []) as string[]) if (!byAz.get(az)!.has(id)) out.push({ az, id });
    });
    return out;
  }
}
