import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { GpuInfo, GpuObservation, PciObservation } from "./signals";
import { runTool, type ToolRun } from "../../util/run-tool";

/**
 * The nvidia-smi fields the agent reads, in query order. Older drivers lack some
 * (`gpu_recovery_action`, the `clocks_event_reasons.*` names): nvidia-smi then refuses
 * the whole query, so `GpuSource` drops a field it names as invalid and asks again.
 */
export const GPU_FIELDS = [
  "index",
  "uuid",
  "pci.bus_id",
  "temperature.gpu",
  "power.draw",
  "utilization.gpu",
  "memory.used",
  "memory.total",
  "ecc.errors.uncorrected.volatile.total",
  "ecc.errors.corrected.volatile.total",
  "remapped_rows.pending",
  "remapped_rows.failure",
  "retired_pages.pending",
  "clocks_event_reasons.hw_slowdown",
  "clocks_event_reasons.hw_thermal_slowdown",
  "clocks_event_reasons.sw_thermal_slowdown",
  "clocks_event_reasons.hw_power_brake_slowdown",
  "gpu_recovery_action",
  "fabric.state",
  "fabric.status",
] as const;

/** Values nvidia-smi prints when it has no number: all read as "not reported". */
const NOT_REPORTED = /^\[?(N\/A|Not Supported|Unknown Error|Requested functionality has been deprecated|GPU requires reset|Insufficient Permissions)\]?$/i;

/** Exit codes with a meaning of their own (nvidia-smi(1) RETURN VALUE). */
const EXIT_DRIVER_NOT_LOADED = 9;
const EXIT_GPU_LOST = 15;
const EXIT_DRIVER_MISMATCH = 18;

function cell(v: string | undefined): string | null {
  if (v === undefined) return null;
  const t = v.trim();
  return t === "" || NOT_REPORTED.test(t) ? null : t;
}

function num(v: string | undefined): number | null {
  const c = cell(v);
  if (c === null) return null;
  // Tolerates units in case `nounits` was not honoured ("69.85 W", "0 MiB").
  const m = /^-?\d+(\.\d+)?/.exec(c);
  return m ? Number(m[0]) : null;
}

function yesNo(v: string | undefined): boolean | null {
  const c = cell(v);
  if (c === null) return null;
  if (/^yes$/i.test(c)) return true;
  if (/^no$/i.test(c)) return false;
  return null;
}

/** Thrown by `parseGpuCsv` for output that is not the CSV that was asked for. */
export class GpuOutputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GpuOutputError";
  }
}

/** Parses `--format=csv,noheader,nounits` output for `fields`. */
export function parseGpuCsv(stdout: string, fields: readonly string[]): GpuInfo[] {
  const lines = stdout.split(/\r?\n/).filter((l) => l.trim() !== "");
  if (lines.length === 0) throw new GpuOutputError("nvidia-smi printed no GPU rows");
  return lines.map((line, i) => {
    const cols = line.split(",").map((c) => c.trim());
    if (cols.length !== fields.length) {
      throw new GpuOutputError(`row ${i + 1} has ${cols.length} columns, expected ${fields.length}: ${JSON.stringify(line.slice(0, 120))}`);
    }
    const get = (f: string): string | undefined => {
      const at = fields.indexOf(f);
      return at < 0 ? undefined : cols[at];
    };
    const index = num(get("index"));
    if (index === null || !Number.isInteger(index)) throw new GpuOutputError(`row ${i + 1} has no GPU index: ${JSON.stringify(line.slice(0, 120))}`);
    const slowdowns = ["hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"].filter(
      (r) => cell(get(`clocks_event_reasons.${r}`)) === "Active",
    );
    const recovery = cell(get("gpu_recovery_action"));
    return {
      index,
      uuid: cell(get("uuid")),
      busId: cell(get("pci.bus_id")),
      temperatureC: num(get("temperature.gpu")),
      powerW: num(get("power.draw")),
      utilizationPct: num(get("utilization.gpu")),
      memoryUsedMiB: num(get("memory.used")),
      memoryTotalMiB: num(get("memory.total")),
      eccUncorrectedVolatile: num(get("ecc.errors.uncorrected.volatile.total")),
      eccCorrectedVolatile: num(get("ecc.errors.corrected.volatile.total")),
      remappedRowsPending: yesNo(get("remapped_rows.pending")),
      remappedRowsFailure: yesNo(get("remapped_rows.failure")),
      retiredPagesPending: yesNo(get("retired_pages.pending")),
      slowdowns,
      recoveryAction: recovery === null || /^none$/i.test(recovery) ? null : recovery,
      fabricState: cell(get("fabric.state")),
      fabricStatus: cell(get("fabric.status")),
    };
  });
}

const INVALID_FIELD = /Field "([^"]+)" is not a valid field to query/;

/** The field an older driver refused by name ("Field … is not a valid field to query"), when it is one that may be dropped. */
export function refusedField(output: string, fields: readonly string[]): string | null {
  const invalid = INVALID_FIELD.exec(output);
  return invalid && fields.includes(invalid[1]) && invalid[1] !== "index" ? invalid[1] : null;
}

/**
 * What an nvidia-smi exit means for the GPUs (nvidia-smi(1) RETURN VALUE), whether the one-shot
 * query or the `-lms` stream ended: 9, 15 and 18 are faults of their own; any other non-zero
 * code is a failed query. `output` is what it printed (standard error first).
 */
export function exitObservation(code: number | null, output: string): GpuObservation {
  const err = firstLine(output);
  if (code === EXIT_DRIVER_NOT_LOADED) return { kind: "driver-not-loaded", detail: err };
  if (code === EXIT_GPU_LOST) return { kind: "gpu-lost", detail: err };
  if (code === EXIT_DRIVER_MISMATCH) return { kind: "driver-mismatch", detail: err };
  return { kind: "failed", exitCode: code, detail: err || `exit code ${code}` };
}

/** `--query-gpu` arguments for `fields` (the stream adds `-lms`). */
export function queryArgs(fields: readonly string[]): string[] {
  return [`--query-gpu=${fields.join(",")}`, "--format=csv,noheader,nounits"];
}

/** How a tool that could not be started reads (ENOENT: the path names nothing). */
export function spawnFailure(path: string, e: NodeJS.ErrnoException): GpuObservation {
  return { kind: "failed", exitCode: null, detail: e.code === "ENOENT" ? `nvidia-smi not found at ${path}` : e.message };
}

/** What reads the GPUs once a period: `GpuSource` (one nvidia-smi per read) or `GpuStream` (one long-lived `-lms` child). */
export interface GpuReader {
  /** The next observation. A reader that `paces` itself waits for it (the caller need not sleep between reads). */
  read(): Promise<GpuObservation>;
  /** True when `read` waits for the next period by itself; false when the caller must call it once a period. */
  readonly paces: boolean;
  /** Fields this driver refused, for the log. */
  readonly droppedFields: readonly string[];
  /** Ends any child it keeps. */
  stop(): void;
}

/**
 * Runs nvidia-smi with a time limit, one process per read (the per-tick path: `LLMHA_GPU_QUERY=per-tick`,
 * and what `GpuStream` falls back to where nvidia-smi refuses `-lms`). A hung nvidia-smi (D state)
 * cannot be killed; while it lives no second one is started, so hung children do not pile up.
 */
export class GpuSource implements GpuReader {
  private fields: string[] = [...GPU_FIELDS];
  private hung: ChildProcess | null = null;
  readonly paces = false;
  /** Fields this driver refused, for the log. */
  readonly droppedFields: string[] = [];

  constructor(
    private readonly path: string,
    private readonly timeoutMs: number,
    /** Fields already known to be refused (a stream that fell back hands over what it learnt). */
    fields: readonly string[] = GPU_FIELDS,
  ) {
    this.fields = [...fields];
  }

  async read(): Promise<GpuObservation> {
    if (this.hung && this.hung.exitCode === null && this.hung.signalCode === null) {
      return { kind: "timeout", detail: `an earlier nvidia-smi (pid ${this.hung.pid}) has not exited` };
    }
    this.hung = null;
    for (let attempt = 0; attempt < GPU_FIELDS.length; attempt++) {
      const r = await this.run();
      if (r.spawnError) return spawnFailure(this.path, r.spawnError);
      if (r.timedOut) return { kind: "timeout", detail: `nvidia-smi did not answer within ${this.timeoutMs} ms` };
      if (r.code !== 0) {
        const ended = exitObservation(r.code, `${r.stderr}\n${r.stdout}`);
        // An older driver refuses a field by name: drop it and ask again (9, 15 and 18 mean what they mean).
        const refused = ended.kind === "failed" ? refusedField(r.stderr + r.stdout, this.fields) : null;
        if (!refused) return ended;
        this.fields = this.fields.filter((f) => f !== refused);
        this.droppedFields.push(refused);
        continue;
      }
      try {
        return { kind: "ok", gpus: parseGpuCsv(r.stdout, this.fields) };
      } catch (e) {
        return { kind: "garbage", detail: (e as Error).message };
      }
    }
    return { kind: "failed", exitCode: null, detail: "nvidia-smi refused every field" };
  }

  stop(): void {
    // Nothing lives between reads; a hung child was already killed at its limit.
  }

  private async run(): Promise<ToolRun> {
    // A child killed at the limit may be in D state and live on: no second one while it does.
    return runTool(this.path, queryArgs(this.fields), this.timeoutMs, { stderr: true, onTimeout: (child) => (this.hung = child) });
  }
}

export function firstLine(s: string): string {
  return s.split(/\r?\n/).find((l) => l.trim() !== "")?.trim().slice(0, 300) ?? "";
}

/** PCI class codes of NVIDIA GPUs: VGA (0x0300xx) and 3D controller (0x0302xx); NVSwitches are bridges (0x0680xx). */
const GPU_CLASS = /^0x030[02]/i;

/** Normalises a bus id to sysfs form, `0000:53:00.0` (nvidia-smi prints `00000000:53:00.0`). */
export function pciKey(busId: string): string {
  const m = /([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$/.exec(busId.trim());
  if (!m) return busId.trim().toLowerCase();
  return `${m[1].slice(-4).padStart(4, "0")}:${m[2]}:${m[3]}.${m[4]}`.toLowerCase();
}

/**
 * NVIDIA GPUs in a sysfs PCI device folder (`/sys/bus/pci/devices`): vendor 0x10de with a
 * display-class code. A GPU that fell off the bus is gone from here even when no XID was logged.
 *
 * `known` (kept by the caller from read to read) remembers what each device folder is: a folder's
 * vendor and class do not change while it exists, so each read lists the folder and reads the two
 * files only for devices it has not seen (a server has a hundred PCI devices or more; read every
 * second, that was most of the agent's file reads). A device that goes away is forgotten.
 */
export function readPciGpus(dir: string, known: Map<string, boolean> = new Map()): PciObservation {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    known.clear();
    return { kind: "error", detail: `cannot list ${dir}: ${(e as Error).message}` };
  }
  const busIds: string[] = [];
  let added = false;
  for (const n of names) {
    let gpu = known.get(n);
    if (gpu === undefined) {
      added = true;
      try {
        const vendor = readFileSync(join(dir, n, "vendor"), "utf8").trim();
        gpu = vendor.toLowerCase() === "0x10de" && GPU_CLASS.test(readFileSync(join(dir, n, "class"), "utf8").trim());
        known.set(n, gpu);
      } catch {
        // a device that vanished while we read, or one without these files: not a GPU we can count
        continue;
      }
    }
    if (gpu) busIds.push(pciKey(n));
  }
  if (added || known.size > names.length) {
    const present = new Set(names);
    for (const n of known.keys()) if (!present.has(n)) known.delete(n);
  }
  return { kind: "ok", busIds: busIds.sort() };
}
