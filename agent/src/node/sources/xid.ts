import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import type { XidEvent } from "./signals";
import { DEFAULT_XID_RULES } from "./xid-rules";

/**
 * XID codes that mean the GPU (not one application) is in trouble and needs a reset or a
 * reboot, and the application XIDs: the `fatal` and `app` rows of the default table
 * (`xid-rules.ts`, overridable with `LLMHA_XID_RULES`).
 */
export const FATAL_XIDS: ReadonlySet<number> = new Set([...DEFAULT_XID_RULES].filter(([, a]) => a === "fatal").map(([c]) => c));
export const APPLICATION_XIDS: ReadonlySet<number> = new Set([...DEFAULT_XID_RULES].filter(([, a]) => a === "app").map(([c]) => c));

const XID_RE = /NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)/;

/** Parses one kernel log line; null when it is not an XID line. */
export function parseXidLine(line: string): XidEvent | null {
  const m = XID_RE.exec(line);
  return m ? { busId: m[1], code: Number(m[2]), line: line.trim().slice(0, 300) } : null;
}

/**
 * Reads new lines of a kernel log (a file that grows, or /dev/kmsg, one record per read).
 * The first read skips what was there before the agent started: old XIDs are not news.
 */
export class XidReader {
  private fd: number | null = null;
  private rest = "";
  private primed = false;

  constructor(private readonly path: string) {}

  /** New XID events since the last call. Throws when the log cannot be opened. */
  read(): XidEvent[] {
    if (this.fd === null) this.fd = openSync(this.path, constants.O_RDONLY | constants.O_NONBLOCK);
    const isFile = fstatSync(this.fd).isFile();
    const buf = Buffer.alloc(64 * 1024);
    let text = "";
    for (let i = 0; i < 4096; i++) {
      let n: number;
      try {
        n = readSync(this.fd, buf, 0, buf.length, null);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === "EAGAIN") break; // /dev/kmsg: no more records now
        if (code === "EPIPE") continue; // /dev/kmsg: records overwritten while we were away
        throw e;
      }
      if (n === 0) break;
      text += buf.toString("utf8", 0, n);
      if (!isFile && !text.endsWith("\n")) text += "\n";
    }
    const all = this.rest + text;
    const cut = all.lastIndexOf("\n");
    this.rest = cut >= 0 ? all.slice(cut + 1) : all;
    const lines = cut >= 0 ? all.slice(0, cut).split("\n") : [];
    if (!this.primed) {
      this.primed = true;
      return [];
    }
    return lines.map(parseXidLine).filter((x): x is XidEvent => x !== null);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
