/** What a process has used so far, from Linux /proc (USER_HZ = 100): the bench's one reader. */
import { readdirSync, readFileSync } from "node:fs";

const TICK = 100;

export interface ProcUsage {
  /** utime + stime of the process itself, seconds. */
  cpuS: number;
  /** cutime + cstime: its waited-for children, seconds. */
  childrenCpuS: number;
  /** Resident set now and its high-water mark, bytes. */
  rss: number;
  hwm: number;
}

export function procUsage(pid: number): ProcUsage {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name: string): number => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  return {
    cpuS: (Number(f[11]) + Number(f[12])) / TICK,
    childrenCpuS: (Number(f[13]) + Number(f[14])) / TICK,
    rss: kb("VmRSS"),
    hwm: kb("VmHWM"),
  };
}

/**
 * A process and its living children together (a primary and its workers): CPU (utime + stime
 * of each, and what each has waited for) and resident set now, summed.
 */
export function treeUsage(pid: number): { cpuS: number; rss: number } {
  const own = procUsage(pid);
  let cpuS = own.cpuS + own.childrenCpuS;
  let rss = own.rss;
  for (const [child, cpu] of liveChildrenCpu(pid)) {
    cpuS += cpu;
    try {
      rss += procUsage(child).rss;
    } catch {
      // a child that ended while we read
    }
  }
  return { cpuS, rss };
}

/**
 * CPU (utime + stime, seconds) of each living child of `pid`, by child pid: a long-lived child
 * (the nvidia-smi stream) is never waited for while it runs, so `childrenCpuS` alone would miss it.
 */
export function liveChildrenCpu(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(f[1]) === pid) out.set(Number(name), (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / TICK);
    } catch {
      // a process that ended while we read
    }
  }
  return out;
}
