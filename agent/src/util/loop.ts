/**
 * A periodic task: re-armed with `setTimeout` after each run behind a `closed` flag, so a
 * slow run never overlaps the next; errors are handed to `onError`, never thrown out of
 * the timer. `kick()` runs it now (unless it is running); `kickAfter()` runs it now, or right
 * after the run in progress when it is running (a run that asks for the next one gets it).
 */
export class Loop {
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private closed = true;
  /** `kickAfter()` was called during a run: run again as soon as it ends. */
  private again = false;

  constructor(
    private readonly periodMs: number,
    private readonly task: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(delayMs = 0): void {
    this.closed = false;
    this.arm(delayMs);
  }

  kick(): void {
    if (this.closed || this.running) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
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
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(delayMs: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => void this.run(), delayMs);
    this.timer.unref?.();
  }

  private async run(): Promise<void> {
    this.timer = null;
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
      this.arm(this.again ? 0 : Math.max(0, this.periodMs - (performance.now() - started)));
      this.again = false;
    }
  }
}
