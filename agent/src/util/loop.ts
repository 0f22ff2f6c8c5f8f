/**
 * A periodic task: re-armed with `setTimeout` after each run behind a `closed` flag, so a
 * slow run never overlaps the next; errors are handed to `onError`, never thrown out of
 * the timer. `kick()` runs it now (unless it is running).
 */
export class Loop {
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private closed = true;

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

  stop(): void {
    this.closed = true;
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
      this.arm(Math.max(0, this.periodMs - (performance.now() - started)));
    }
  }
}
