/**
 * One timer per grid point for every aligned loop due at it. Each loop arming its own timer for
 * the same point woke the process two or three times, a millisecond apart: Node sets a timer's
 * expiry from its loop's cached clock, which had moved on by a millisecond between one loop's
 * arming and the next. Returns how to leave the point (the timer goes when no loop is left).
 */
const gridPoints = new Map<number, { timer: NodeJS.Timeout; runs: Set<() => void> }>();

function atGridPoint(at: number, delayMs: number, run: () => void): () => void {
  let point = gridPoints.get(at);
  if (!point) {
    const runs = new Set<() => void>();
    const timer = setTimeout(() => {
      gridPoints.delete(at);
      for (const r of runs) r();
    }, delayMs);
    timer.unref?.();
    point = { timer, runs };
    gridPoints.set(at, point);
  }
  point.runs.add(run);
  const p = point;
  return () => {
    p.runs.delete(run);
    if (p.runs.size === 0 && gridPoints.get(at) === p) {
      clearTimeout(p.timer);
      gridPoints.delete(at);
    }
  };
}

/**
 * A periodic task: re-armed with `setTimeout` after each run behind a `closed` flag, so a
 * slow run never overlaps the next; errors are handed to `onError`, never thrown out of
 * the timer. `kick()` runs it now (unless it is running); `kickAfter()` runs it now, or right
 * after the run in progress when it is running (a run that asks for the next one gets it).
 * The period may change from run to run: a function is read as each run ends.
 */
export class Loop {
  /** Cancels the next run armed (its timer, its place at a grid point, or its immediate). */
  private cancel: (() => void) | null = null;
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

  /** How long to wait for the next run of one that started at `started`, and the grid point it waits for (aligned loops). */
  private delayAfter(started: number, period: number): { delayMs: number; at: number | null } {
    const now = performance.now();
    if (!this.align || period <= 0) return { delayMs: Math.max(0, period - (now - started)), at: null };
    // The grid point nearest to a steady period's next start: at most half a period early or late once.
    const at = Math.round((started + period) / period) * period;
    return { delayMs: Math.max(0, Math.ceil(at - now)), at };
  }

  private arm(delayMs: number, at: number | null = null): void {
    if (this.closed) return;
    const run = (): void => void this.run();
    // No wait: right after this turn of the event loop, not on a 1 ms timer (a wake of its own).
    if (delayMs <= 0) {
      const immediate = setImmediate(run).unref();
      this.cancel = () => clearImmediate(immediate);
    } else if (at !== null) {
      this.cancel = atGridPoint(at, delayMs, run);
    } else {
      const timer = setTimeout(run, delayMs);
      timer.unref?.();
      this.cancel = () => clearTimeout(timer);
    }
  }

  private disarm(): void {
    this.cancel?.();
    this.cancel = null;
  }

  private async run(): Promise<void> {
    this.cancel = null;
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
      if (this.again) this.arm(0);
      else {
        const next = this.delayAfter(started, period);
        this.arm(next.delayMs, next.at);
      }
      this.again = false;
    }
  }
}
