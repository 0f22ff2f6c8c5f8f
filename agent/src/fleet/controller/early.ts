/**
 * The leader's early look: a node whose status changes writes an event (heartbeat-7.lua, the
 * `events` stream) in the same call that writes its record, so the leader that follows the stream
 * can evaluate at once instead of at its next period — an AZ's fault is decided within a read of
 * the agents' reports, not within a period (1 s at the defaults) plus a read.
 *
 * One blocking `XREAD` on a connection of its own (a blocked connection serves nothing else),
 * from the stream's end at the start of the term: only what happens from now on counts. Any node
 * event with a hard reason, or a silent node swept, calls `onWorse` (`worsens` below says why
 * soft-only reports wait for the period). A failed read (Redis restarting, the connection lost) is tried again after a
 * pause; periodic evaluations go on meanwhile, so this only ever makes a decision earlier.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../util/log";

/** How long one `XREAD` blocks, ms: a stop is seen at once (the connection is closed), this only bounds a quiet read. */
const BLOCK_MS = 5000;
/** The pause after a failed read, ms. */
const RETRY_MS = 1000;

export class WorseningWatch {
  private conn: Redis | null = null;
  private closed = false;

  constructor(
    private readonly redis: Redis,
    private readonly stream: string,
    private readonly onWorse: () => void,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.conn) return;
    this.closed = false;
    // Same server and credentials; no offline queue and no reconnect of its own: the loop below retries.
    const conn = this.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: 1, lazyConnect: false });
    conn.on("error", () => undefined);
    this.conn = conn;
    void this.follow(conn);
  }

  stop(): void {
    this.closed = true;
    const c = this.conn;
    this.conn = null;
    c?.disconnect();
  }

  private async follow(conn: Redis): Promise<void> {
    let last = "$";
    while (!this.closed && this.conn === conn) {
      try {
        const r = (await conn.xread("COUNT", 1000, "BLOCK", BLOCK_MS, "STREAMS", this.stream, last)) as [string, [string, string[]][]][] | null;
        const entries = r?.[0]?.[1] ?? [];
        if (entries.length) last = entries[entries.length - 1][0];
        if (entries.some(([, f]) => worsens(f))) this.onWorse();
      } catch (err) {
        if (this.closed || this.conn !== conn) return;
        this.log.debug({ err: (err as Error).message }, "the early look's event read failed; periodic evaluations go on");
        await new Promise((r) => setTimeout(r, RETRY_MS).unref?.());
      }
    }
  }
}

/**
 * A node event (stream fields as a flat list) that must be decided at once: a node out for a
 * hard reason (a lost GPU, an XID, a dead engine: `hard` not empty), or a silent node's record
 * swept (`EXPIRED`). A node out on soft checks alone waits for the period: the blast-radius
 * cap (state.ts) keeps nodes in when most of them fail the same soft check — a broken probe or
 * a shared dependency — and it can only see that once their reports are in, which the period's
 * batch gives it. Deciding on the first such report published a false DEGRADED that then took
 * `recoverPeriods` to undo.
 */
export function worsens(fields: readonly string[]): boolean {
  let type = "";
  let status = "";
  let hard = "";
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] === "type") type = fields[i + 1];
    else if (fields[i] === "status") status = fields[i + 1];
    else if (fields[i] === "hard") hard = fields[i + 1];
  }
  return type === "node" && status !== "HEALTHY" && (hard !== "" || status === "EXPIRED");
}

/**
 * The early look of one term: the watch above, and at most one early evaluation per `minGapMs`
 * (a fault's events arrive by the hundred), counted from the start of the last evaluation,
 * periodic or early; `run` queues it after any evaluation under way.
 */
export class EarlyLook {
  private readonly watch: WorseningWatch;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(redis: Redis, stream: string, private readonly minGapMs: number, private readonly lastStart: () => number, log: Logger, private readonly run: () => void) {
    this.watch = new WorseningWatch(redis, stream, () => this.soon(), log);
  }

  start(): void {
    this.watch.start();
  }

  stop(): void {
    this.stopped = true;
    this.watch.stop();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private soon(): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.stopped) this.run();
    }, Math.max(0, this.lastStart() + this.minGapMs - Date.now()));
  }
}
