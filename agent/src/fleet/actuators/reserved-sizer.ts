/**
 * Drives `capacity.size` for the leader: once a minute while it leads, the fenced actuator
 * sizes the GPU groups `pulumi up` created at zero on a capacity reservation or Capacity
 * Block, once the reservation is active (aws/reserved.ts). Runs in the background, one round
 * at a time, never blocking the controller's tick. What each group waits for is logged when it
 * changes (not every round); what changed is an action event (gate.ts).
 */
import type { Logger } from "../../util/log";
import { LeaderRound } from "./leader-round";
import type { ActionContext, ActionResult } from "./types";

export interface ReservedSizerOptions {
  /** The fenced actuator's `sizeReserved`. */
  sizeReserved(ctx: ActionContext): Promise<ActionResult[]>;
  /** The token of the term this process leads now, or null. */
  currentToken(): number | null;
  log: Logger;
  /** Round period. Default 60000 ms. */
  everyMs?: number;
  now?: () => number;
}

export const RESERVED_REASON = "reserved capacity: size the groups created at zero once their reservation is active";

export class ReservedSizer {
  private readonly log: Logger;
  private readonly rounds: LeaderRound;
  /** The last detail seen per result, to log a group's state once per change. */
  private readonly seen = new Map<string, string>();

  constructor(private readonly o: ReservedSizerOptions) {
    this.log = o.log.child({ component: "reserved-sizer" });
    this.rounds = new LeaderRound({
      everyMs: o.everyMs ?? 60_000, now: o.now ?? Date.now, currentToken: () => o.currentToken(), run: (token) => this.round(token),
      log: this.log, failure: "could not size the reserved GPU groups",
    });
  }

  /** After each published period of a term: a round when due, in the background. */
  onPeriod(token: number): void {
    this.rounds.onPeriod(token);
  }

  /** Waits for a round in flight (tests, shutdown). */
  async idle(): Promise<void> {
    await this.rounds.idle();
  }

  /** The term ended: the next leader starts at once. */
  endTerm(): void {
    this.rounds.endTerm();
    this.seen.clear();
  }

  private async round(token: number): Promise<void> {
    const results = await this.o.sizeReserved({ token, reason: RESERVED_REASON });
    for (const r of results) {
      if (r.outcome !== "already") continue; // changes and failures are logged and recorded by the gate
      const group = r.group ?? "";
      if (this.seen.get(group) === r.detail) continue;
      this.seen.set(group, r.detail);
      this.log.info({ group, az: r.az, detail: r.detail }, "reserved GPU group");
    }
  }
}
