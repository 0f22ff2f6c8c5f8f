import { existsSync } from "node:fs";
import type { Logger } from "../../util/log";

/**
 * A planned drain: the drain file exists (the inference pod's preStop hook wrote it before its
 * server stops). Read at most once per half evaluation period; an unreadable directory is no
 * drain (the file's absence is the normal state). Each change is logged once.
 */
export class DrainFile {
  /** The file as last read. */
  seen = false;
  private readAt: number | null = null;

  constructor(
    readonly file: string,
    private readonly intervalMs: number,
    private readonly clock: () => number,
    private readonly log: Logger,
  ) {}

  /** Whether the file is there now (from the last read when it was read less than half a period ago). */
  present(): boolean {
    const now = this.clock();
    if (this.readAt !== null && now - this.readAt < this.intervalMs / 2) return this.seen;
    this.readAt = now;
    const seen = existsSync(this.file);
    if (seen !== this.seen) this.log.info({ event: seen ? "planned-drain" : "planned-drain-over", file: this.file }, seen ? `planned drain: ${this.file} present, HAProxy gets drain` : `planned drain over: ${this.file} gone`);
    this.seen = seen;
    return seen;
  }
}
