import type { Logger } from "../../util/log";
import type { Signals, XidEvent } from "./signals";
import { XidReader } from "./xid";
import { parseXidRules, XidJudge } from "./xid-rules";

/**
 * The XID source: each period, the kernel log's new XID lines, judged by the rules
 * (`LLMHA_XID_RULES`) into the fatal XIDs and the windowed rules over their count. A log that
 * cannot be read turns the checks off until it can, said once per distinct error.
 */
export class XidSource {
  private readonly reader: XidReader;
  private readonly judge: XidJudge;
  private error: string | null = null;

  constructor(
    private readonly path: string,
    rules: string | null,
    private readonly log: Logger,
  ) {
    this.reader = new XidReader(path);
    this.judge = new XidJudge(parseXidRules(rules));
  }

  /**
   * Reads and judges at `now`, setting `signals.fatalXids` and `signals.xidRepeated`. Returns
   * whether the verdict needs an evaluation (new events, or a window that ended), or `"failed"`.
   */
  check(signals: Signals, now: number): boolean | "failed" {
    let events: XidEvent[];
    try {
      events = this.reader.read();
    } catch (err) {
      const msg = (err as Error).message;
      if (msg !== this.error) this.log.warn({ err: msg, path: this.path }, "cannot read the kernel log for XIDs; XID checks are off until it can");
      this.error = msg;
      return "failed";
    }
    if (this.error !== null) this.log.info({ path: this.path }, "kernel log readable again; XID checks are on");
    this.error = null;
    for (const x of events) {
      const action = this.judge.add(x, now);
      this.log.warn({ event: "xid", xid: x.code, busId: x.busId, action: typeof action === "string" ? action : `${action.count}/${action.windowMs}ms` }, x.line);
    }
    // Windowed rules are judged against the clock: a window that ends clears its fault.
    const v = this.judge.verdict(now);
    const before = `${signals.fatalXids?.length ?? 0}/${JSON.stringify(signals.xidRepeated ?? [])}`;
    signals.fatalXids = v.fatal;
    signals.xidRepeated = v.repeated;
    return events.length > 0 || before !== `${v.fatal.length}/${JSON.stringify(v.repeated)}`;
  }

  close(): void {
    this.reader.close();
  }
}
