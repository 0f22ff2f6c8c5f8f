import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import type { XidEvent } from "./signals";

/**
 * XID codes that mean the GPU (not one application) is in trouble and needs a reset or a
 * reboot: double-bit ECC (48), fallen off the bus (79), NVLink (74), row-remap failure (64),
 * uncontained ECC (95), GSP timeouts/errors (119, 120), and their kin. Application XIDs
 * (13 graphics engine exception, 31 MMU fault, 43 channel stopped, 45 preemptive cleanup)
 * are not node faults.
 */
export const FATAL_XIDS: ReadonlySet<number> = new Set([48, 56, 57, 58, 62, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 95, 109, 110, 119, 120, 121, 140]);
export const APPLICATION_XIDS: ReadonlySet<number> = new Set([13, 31, 43, 45]);

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
