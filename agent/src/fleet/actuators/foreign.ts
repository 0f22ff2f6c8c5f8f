/**
 * Changes to the cloud the controller did not make: the leader reads the world
 * through its actuator (`audit`, reads only) every `everyMs`, and reports what no llm-ha action
 * explains — a zonal shift without llm-ha's comment, a standby or fallback group resized or held
 * off its schedule by someone else. llm-ha never undoes them (an operator's shift is theirs);
 * it makes them impossible to miss:
 *
 * - `llmha_foreign_actions_total{kind}` counts each one once, when first confirmed;
 *   `llmha_foreign_actions_active{kind}` is how many stand now (the alert `LlmhaForeignCloudAction`);
 * - an event `type=foreign-action` in the leader's `events` stream (`llm-ha status` shows it);
 * - a warning log line.
 *
 * A sighting counts once seen in two audits in a row: a call of our own in flight (a release
 * between its resize and its tag removal) is not reported.
 */
import type { Redis } from "ioredis";
import { Counter, Gauge, type Registry } from "prom-client";
import type { RedisKeys } from "../redis/keys";
import type { Logger } from "../../util/log";
import { LeaderRound } from "./leader-round";
import { FOREIGN_KINDS, type ForeignAction, type ForeignKind } from "./types";

export const FOREIGN_TOTAL_METRIC = "llmha_foreign_actions_total";
export const FOREIGN_ACTIVE_METRIC = "llmha_foreign_actions_active";

export interface ForeignWatchOptions {
  /** Reads the world (the fenced actuator's `audit`). */
  audit(): Promise<ForeignAction[]>;
  redis: Redis;
  keys: RedisKeys;
  /** The token of the term this process leads now, or null. */
  currentToken(): number | null;
  log: Logger;
  registry: Registry;
  /** Lease holder id, written with each event. */
  holder: string;
  /** Audit period. Default 30000 ms. */
  everyMs?: number;
  now?: () => number;
}

export class ForeignWatch {
  private readonly total: Counter<"kind">;
  private readonly active: Gauge<"kind">;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly round: LeaderRound;
  /** Seen in the last audit, not yet confirmed. */
  private pending = new Set<string>();
  /** Confirmed and reported, still standing. */
  private reported = new Set<string>();

  constructor(private readonly o: ForeignWatchOptions) {
    this.log = o.log.child({ component: "foreign-watch" });
    this.now = o.now ?? Date.now;
    this.round = new LeaderRound({
      everyMs: o.everyMs ?? 30_000, now: this.now, currentToken: () => o.currentToken(), run: (token) => this.audit(token),
      log: this.log, failure: "could not audit the cloud for foreign actions",
    });
    const get = <T>(name: string): T | undefined => o.registry.getSingleMetric(name) as T | undefined;
    this.total = get(FOREIGN_TOTAL_METRIC) ?? new Counter({
      name: FOREIGN_TOTAL_METRIC,
      help: "Cloud changes the controller did not make (kind: shift = a zonal shift without llm-ha's comment; standby = a standby/fallback group resized or held off its schedule), counted once each",
      labelNames: ["kind"],
      registers: [o.registry],
    });
    this.active = get(FOREIGN_ACTIVE_METRIC) ?? new Gauge({
      name: FOREIGN_ACTIVE_METRIC,
      help: "Cloud changes the controller did not make that stand now, as the leader's last audit saw them",
      labelNames: ["kind"],
      registers: [o.registry],
    });
    for (const kind of FOREIGN_KINDS) {
      this.total.inc({ kind }, 0);
      this.active.set({ kind }, 0);
    }
  }

  /** After each published period of a term: audits when due, in the background. */
  onPeriod(token: number): void {
    this.round.onPeriod(token);
  }

  /** Waits for an audit in flight (tests, shutdown). */
  async idle(): Promise<void> {
    await this.round.idle();
  }

  /** The term ended: the next leader audits and reports on its own. */
  endTerm(): void {
    this.pending.clear();
    this.reported.clear();
    this.round.endTerm();
    for (const kind of FOREIGN_KINDS) this.active.set({ kind }, 0);
  }

  private async audit(token: number): Promise<void> {
    const seen = await this.o.audit();
    if (this.o.currentToken() !== token) return;
    const ids = new Set(seen.map((f) => f.id));
    const counts: Record<ForeignKind, number> = { shift: 0, standby: 0 };
    for (const f of seen) {
      if (!this.pending.has(f.id) && !this.reported.has(f.id)) continue; // first sighting: confirm next audit
      counts[f.kind] += 1;
      if (this.reported.has(f.id)) continue;
      this.reported.add(f.id);
      this.total.inc({ kind: f.kind });
      this.log.warn({ kind: f.kind, az: f.az, id: f.id, detail: f.detail }, "a cloud change the controller did not make");
      await this.o.redis
        .xadd(this.o.keys.events, "MAXLEN", "~", "10000", "*", "type", "foreign-action", "kind", f.kind, "az", f.az ?? "", "id", f.id.slice(0, 200), "detail", f.detail.slice(0, 500), "token", String(token), "leader", this.o.holder, "at", String(this.now()))
        .catch((err: unknown) => this.log.warn({ err: (err as Error).message }, "could not record the foreign action in the events stream"));
    }
    this.pending = new Set([...ids].filter((id) => !this.reported.has(id)));
    for (const id of [...this.reported]) if (!ids.has(id)) this.reported.delete(id);
    for (const kind of FOREIGN_KINDS) this.active.set({ kind }, counts[kind]);
  }
}
