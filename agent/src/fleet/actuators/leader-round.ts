/**
 * A leader's background chore, run after a published period when due: at most one round in
 * flight, at most one round per `everyMs`, only for the term that asked, never blocking the
 * controller's tick. A failed round is logged; the next is due a period later. The foreign-action
 * audit (foreign.ts) and the reserved-group sizing (reserved-sizer.ts) run on it.
 */
import type { Logger } from "../../util/log";

export class LeaderRound {
  private nextAt = 0;
  private running: Promise<void> | null = null;

  constructor(
    private readonly o: {
      everyMs: number;
      now: () => number;
      /** The token of the term this process leads now, or null. */
      currentToken(): number | null;
      run(token: number): Promise<void>;
      log: Logger;
      /** The log line of a failed round. */
      failure: string;
    },
  ) {}

  /** After each published period of a term: a round when due, in the background. */
  onPeriod(token: number): void {
    if (this.running || this.o.currentToken() !== token || this.o.now() < this.nextAt) return;
    this.nextAt = this.o.now() + this.o.everyMs;
    this.running = this.o
      .run(token)
      .catch((err: unknown) => this.o.log.warn({ err: (err as Error).message }, this.o.failure))
      .finally(() => (this.running = null));
  }

  /** Waits for a round in flight (tests, shutdown). */
  async idle(): Promise<void> {
    await this.running;
  }

  /** The term ended: the next term's first round is due at once. */
  endTerm(): void {
    this.nextAt = 0;
  }
}
