import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAKE_NVIDIA_SMI_PATH, FAULTED_GPU, NVSMI_FAULTS, writeNvsmiState, type NvsmiState } from "../../lab/sim/nvsmi-state";

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  killed: boolean;
}

let dir: string;
let stateFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "fake-nvsmi-"));
  stateFile = join(dir, "state.json");
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs the executable as the agent will: directly, by path, with the state file in its environment. */
async function smi(args: string[], state?: NvsmiState, timeoutMs = 10_000): Promise<Result> {
  if (state) await writeNvsmiState(stateFile, state);
  else await rm(stateFile, { force: true });
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      FAKE_NVIDIA_SMI_PATH,
      args,
      { env: { ...process.env, FAKE_NVSMI_STATE: stateFile }, timeout: timeoutMs },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : null) : 0;
        resolve({ code, stdout, stderr, ms: Date.now() - started, killed: Boolean(err?.killed) });
      },
    );
  });
}

const Q = (fields: string, format = "csv,noheader,nounits"): string[] => [`--query-gpu=${fields}`, `--format=${format}`];
/** Rows of a noheader answer, split as a parser would. */
const rows = (out: string): string[][] => out.trimEnd().split("\n").map((l) => l.split(", "));

describe("fake nvidia-smi", () => {
  it("answers any field list in the order asked, one row per GPU, with distinct identities", async () => {
    const r = await smi(Q("memory.used,uuid,index,pci.bus_id,temperature.gpu"));
    expect(r.code).toBe(0);
    const rs = rows(r.stdout);
    expect(rs).toHaveLength(8);
    expect(rs[0]).toEqual(["0", "GPU-566e6f65-c38e-b12f-4824-6944218668b9", "0", "00000000:53:00.0", "41"]);
    expect(new Set(rs.map((x) => x[1])).size).toBe(8);
    expect(new Set(rs.map((x) => x[3])).size).toBe(8);
    expect(rs.map((x) => x[2])).toEqual(["0", "1", "2", "3", "4", "5", "6", "7"]);
  });

  it("prints headers and units exactly as nvidia-smi does, and drops them on request", async () => {
    const fields = "index,memory.used,utilization.gpu,power.draw,clocks.current.sm,display_mode,hostname";
    const withAll = await smi(Q(fields, "csv"), { gpuCount: 1, profile: "load" });
    expect(withAll.stdout).toBe(
      "index, memory.used [MiB], utilization.gpu [%], power.draw [W], clocks.current.sm [MHz], display_mode, hostname\n" +
        "0, 19818 MiB, 100 %, 631.95 W, 1980 MHz, [Requested functionality has been deprecated], [N/A]\n",
    );
    const nounits = await smi(Q(fields, "csv,nounits"), { gpuCount: 1, profile: "load" });
    expect(nounits.stdout).toBe(
      "index, memory.used, utilization.gpu, power.draw, clocks.current.sm, display_mode, hostname\n" +
        "0, 19818, 100, 631.95, 1980, [Requested functionality has been deprecated], [N/A]\n",
    );
    const noheader = await smi(Q(fields, "csv,noheader"), { gpuCount: 1, profile: "load" });
    expect(noheader.stdout).toBe("0, 19818 MiB, 100 %, 631.95 W, 1980 MHz, [Requested functionality has been deprecated], [N/A]\n");
    const us = await smi(Q("clocks_event_reasons_counters.sw_power_cap", "csv"), { gpuCount: 1 });
    expect(us.stdout).toBe("clocks_event_reasons_counters.sw_power_cap [us]\n0 us\n");
  });

  it("accepts the documented aliases and prints the canonical name", async () => {
    const r = await smi(Q("gpu_name,clocks_throttle_reasons.hw_thermal_slowdown", "csv"), { gpuCount: 1 });
    expect(r.stdout).toBe("name, clocks_event_reasons.hw_thermal_slowdown\nNVIDIA H100 80GB HBM3, Not Active\n");
  });

  it("refuses an unknown field with exit 2", async () => {
    const r = await smi(Q("index,gpu.bogus"));
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim()).toBe('Field "gpu.bogus" is not a valid field to query.');
  });

  it("lists GPUs and prints its version", async () => {
    const list = await smi(["-L"], { gpuCount: 2 });
    expect(list.stdout).toBe(
      "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-566e6f65-c38e-b12f-4824-6944218668b9)\n" +
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-9930d717-21dd-7692-054e-3d0a2bae76b5)\n",
    );
    expect((await smi(["--version"])).stdout).toContain("DRIVER version      : 590.48.01");
  });

  it("takes values with or without units in overrides", async () => {
    const r = await smi(Q("memory.used", "csv,noheader"), { gpuCount: 2, overrides: { "*": { "memory.used": "100" }, 1: { "memory.used": "7 MiB" } } });
    expect(r.stdout).toBe("100 MiB\n7 MiB\n");
  });

  it.each([
    ["driverNotLoaded", 9, "couldn't communicate with the NVIDIA driver"],
    ["gpuLost", 15, "GPU is lost"],
    ["driverMismatch", 18, "Driver/library version mismatch"],
  ] as const)("%s exits %i with the real message", async (fault, code, text) => {
    const r = await smi(Q("index"), NVSMI_FAULTS[fault]);
    expect(r.code).toBe(code);
    expect(r.stderr).toContain(text);
    expect(r.stdout).toBe("");
  });

  it("hang holds the caller until it gives up", async () => {
    const r = await smi(Q("index"), NVSMI_FAULTS.hang, 500);
    expect(r.killed).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(450);
    const short = await smi(Q("index"), { hangMs: 300, gpuCount: 1 });
    expect(short.ms).toBeGreaterThanOrEqual(300);
    expect(short.stdout).toBe("0\n");
  });

  it("garbage prints something that is not CSV and exits 0", async () => {
    const r = await smi(Q("index,uuid"), NVSMI_FAULTS.garbage);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/^\d+, GPU-/m);
  });

  it.each([
    ["eccUncorrected", "ecc.errors.uncorrected.volatile.total", "0", "2"],
    ["rowRemapFailure", "remapped_rows.failure", "No", "Yes"],
    ["rowRemapPending", "remapped_rows.pending", "No", "Yes"],
    ["retiredPagesPending", "retired_pages.pending", "[N/A]", "Yes"],
    ["recoveryAction", "gpu_recovery_action", "None", "Reset"],
    ["thermal", "clocks_event_reasons.hw_thermal_slowdown", "Not Active", "Active"],
    ["unknownError", "temperature.gpu", "41", "[Unknown Error]"],
  ] as const)("%s sets %s on one GPU only", async (fault, field, healthy, faulted) => {
    const r = await smi(Q(`index,${field}`), NVSMI_FAULTS[fault]);
    expect(r.code).toBe(0);
    const values = rows(r.stdout).map((x) => x[1]);
    expect(values[FAULTED_GPU]).toBe(faulted);
    expect(values.filter((v) => v === healthy)).toHaveLength(7);
  });

  it("migNA reports utilization as [N/A] on every GPU", async () => {
    const r = await smi(Q("utilization.gpu", "csv"), NVSMI_FAULTS.migNA);
    expect(r.stdout.split("\n")[0]).toBe("utilization.gpu [%]");
    expect(rows(r.stdout).slice(1).flat()).toEqual(Array(8).fill("[N/A]"));
  });

  it("gpuMissing drops one GPU and renumbers the rest", async () => {
    const r = await smi(Q("index,uuid,count"), NVSMI_FAULTS.gpuMissing);
    const rs = rows(r.stdout);
    expect(rs).toHaveLength(7);
    expect(rs.map((x) => x[0])).toEqual(["0", "1", "2", "3", "4", "5", "6"]);
    expect(rs.map((x) => x[1])).not.toContain("GPU-6b932a61-abfd-5ea1-b26a-7dea7f2fa601");
    expect(rs.every((x) => x[2] === "7")).toBe(true);
    expect((await smi(["-L"], NVSMI_FAULTS.gpuMissing)).stdout.trimEnd().split("\n")).toHaveLength(7);
  });

  it("answers with the defaults when the state file is missing", async () => {
    const r = await smi(Q("index"));
    expect(r.stdout.trimEnd().split("\n")).toHaveLength(8);
  });
});
