/**
 * A periodic task: re-armed with `setTimeout` after each run behind a `closed` flag, so a
 * slow run never overlaps the next; errors are handed to `onError`, never thrown out of
 * the timer. `kick()` runs it now (unless it is running); `kickAfter()` runs it now, or right
 * after the run in progress when it is running (a run that asks for the next one gets it).
 * The period may change from run to run: a function is read as each run ends.
 */
export class Loop {
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private running = false;
  private closed = true;
  /** `kickAfter()` was called during a run: run again as soon as it ends. */
  private again = false;

  constructor(
    /** The period, or a function giving it for the next run (read when a run ends). */
    private readonly periodMs: number | (() => number),
    private readonly task: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
    /**
     * Run on the process's grid of the period (multiples of it on the monotonic clock), so that
     * loops of one period, or of periods that divide each other, wake the process together
     * rather than each on its own: a wake costs a process far more than the work it does.
     */
    private readonly align = false,
  ) {}

  start(delayMs = 0): void {
    this.closed = false;
    this.arm(delayMs);
  }

  kick(): void {
    if (this.closed || this.running) return;
    this.disarm();
    void this.run();
  }

  /** Runs it now, or once the run in progress ends; asks during one run make one more run. */
  kickAfter(): void {
    if (this.closed) return;
    if (this.running) this.again = true;
    else this.kick();
  }

  stop(): void {
    this.closed = true;
    this.again = false;
    this.disarm();
  }

  /** How long to wait for the next run of one that started at `started`. */
  private delayAfter(started: number, period: number): number {
    const now = performance.now();
    if (!this.align || period <= 0) return Math.max(0, period - (now - started));
    // The grid point nearest to a steady period's next start: at most half a period early or late once.
    const at = Math.round((started + period) / period) * period;
    return Math.max(0, Math.ceil(at - now));
  }

  private arm(delayMs: number): void {
    if (this.closed) return;
    // No wait: right after this turn of the event loop, not on a 1 ms timer (a wake of its own).
    if (delayMs <= 0) {
      this.immediate = setImmediate(() => void this.run());
      this.immediate.unref();
      return;
    }
    this.timer = setTimeout(() => void this.run(), delayMs);
    this.timer.unref?.();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = null;
    this.immediate = null;
  }

  private async run(): Promise<void> {
    this.timer = null;
    this.immediate = null;
    if (this.closed || this.running) return;
    this.running = true;
    const started = performance.now();
    try {
      await this.task();
    } catch (err) {
      this.onError(err);
    } finally {
      this.running = false;
      // Keep a steady period: the next run starts `periodMs` after this one started.
      const period = typeof this.periodMs === "function" ? this.periodMs() : this.periodMs;
      this.arm(this.again ? 0 : this.delayAfter(started, period));
      this.again = false;
    }
  }
}
