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

/**
 * Runs nvidia-smi with a time limit. A hung nvidia-smi (D state) cannot be killed;
 * while it lives no second one is started, so hung children do not pile up.
 */
export class GpuSource {
  private fields: string[] = [...GPU_FIELDS];
  private hung: ChildProcess | null = null;
  /** Fields this driver refused, for the log. */
  readonly droppedFields: string[] = [];

  constructor(
    private readonly path: string,
    private readonly timeoutMs: number,
  ) {}

  async read(): Promise<GpuObservation> {
    if (this.hung && this.hung.exitCode === null && this.hung.signalCode === null) {
      return { kind: "timeout", detail: `an earlier nvidia-smi (pid ${this.hung.pid}) has not exited` };
    }
    this.hung = null;
    for (let attempt = 0; attempt < GPU_FIELDS.length; attempt++) {
      const r = await this.run();
      if (r.spawnError) return { kind: "failed", exitCode: null, detail: r.spawnError.code === "ENOENT" ? `nvidia-smi not found at ${this.path}` : r.spawnError.message };
      if (r.timedOut) return { kind: "timeout", detail: `nvidia-smi did not answer within ${this.timeoutMs} ms` };
      const err = firstLine(r.stderr) || firstLine(r.stdout);
      if (r.code === EXIT_DRIVER_NOT_LOADED) return { kind: "driver-not-loaded", detail: err };
      if (r.code === EXIT_GPU_LOST) return { kind: "gpu-lost", detail: err };
      if (r.code === EXIT_DRIVER_MISMATCH) return { kind: "driver-mismatch", detail: err };
      const invalid = INVALID_FIELD.exec(r.stderr + r.stdout);
      if (r.code !== 0 && invalid && this.fields.includes(invalid[1]) && invalid[1] !== "index") {
        this.fields = this.fields.filter((f) => f !== invalid[1]);
        this.droppedFields.push(invalid[1]);
        continue;
      }
      if (r.code !== 0) return { kind: "failed", exitCode: r.code, detail: err || `exit code ${r.code}` };
      try {
        return { kind: "ok", gpus: parseGpuCsv(r.stdout, this.fields) };
      } catch (e) {
        return { kind: "garbage", detail: (e as Error).message };
      }
    }
    return { kind: "failed", exitCode: null, detail: "nvidia-smi refused every field" };
  }

  private async run(): Promise<ToolRun> {
    const args = [`--query-gpu=${this.fields.join(",")}`, "--format=csv,noheader,nounits"];
    // A child killed at the limit may be in D state and live on: no second one while it does.
    return runTool(this.path, args, this.timeoutMs, { stderr: true, onTimeout: (child) => (this.hung = child) });
  }
}

function firstLine(s: string): string {
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
 */
export function readPciGpus(dir: string): PciObservation {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    return { kind: "error", detail: `cannot list ${dir}: ${(e as Error).message}` };
  }
  const busIds: string[] = [];
  for (const n of names) {
    try {
      const vendor = readFileSync(join(dir, n, "vendor"), "utf8").trim();
      if (vendor.toLowerCase() !== "0x10de") continue;
      const cls = readFileSync(join(dir, n, "class"), "utf8").trim();
      if (GPU_CLASS.test(cls)) busIds.push(pciKey(n));
    } catch {
      // a device that vanished while we read, or one without these files: not a GPU we can count
    }
  }
  return { kind: "ok", busIds: busIds.sort() };
}
