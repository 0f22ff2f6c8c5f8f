import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GPU_FIELDS, GpuSource, parseGpuCsv } from "../../agent/src/node/sources/gpu";
import { parseXidLine, XidReader, FATAL_XIDS } from "../../agent/src/node/sources/xid";
import { eccCorrected, FAKE_NVIDIA_SMI_PATH, FAULTED_GPU, NVSMI_FAULTS, writeNvsmiState, type NvsmiFault } from "../../lab/sim/nvsmi-state";
import { GpuWarningTracker } from "../../agent/src/node/sources/gpu-warn";

const dir = mkdtempSync(join(tmpdir(), "llmha-gpu-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** nvidia-smi as the agent runs it: the fake replaying the real H100 capture, driven by a state file. */
async function readWith(state: object, timeoutMs = 3000): Promise<ReturnType<GpuSource["read"]>> {
  const p = join(dir, `s-${Math.random()}.json`);
  await writeNvsmiState(p, state);
  const wrapper = join(dir, `nvsmi-${Math.random()}.sh`);
  writeFileSync(wrapper, `#!/bin/sh\nFAKE_NVSMI_STATE=${p} exec ${FAKE_NVIDIA_SMI_PATH} "$@"\n`);
  chmodSync(wrapper, 0o755);
  return new GpuSource(wrapper, timeoutMs).read();
}

describe("nvidia-smi parsing", () => {
  it("reads every GPU of the real capture with the agent's field list", async () => {
    const obs = await readWith({ gpuCount: 8 });
    expect(obs.kind).toBe("ok");
    if (obs.kind !== "ok") return;
    expect(obs.gpus).toHaveLength(8);
    expect(obs.gpus[0]).toMatchObject({ index: 0, temperatureC: 41, powerW: 69.85, memoryTotalMiB: 81559, eccUncorrectedVolatile: 0, recoveryAction: null, slowdowns: [] });
    // The capture reports retired_pages.pending as [N/A] on H100 (row remapping replaced it).
    expect(obs.gpus[0].retiredPagesPending).toBeNull();
    expect(new Set(obs.gpus.map((g) => g.uuid)).size).toBe(8);
  });

  it.each<[NvsmiFault, string, string]>([
    ["driverNotLoaded", "driver-not-loaded", "couldn't communicate with the NVIDIA driver"],
    ["gpuLost", "gpu-lost", "GPU is lost"],
    ["driverMismatch", "driver-mismatch", "Driver/library version mismatch"],
    ["garbage", "garbage", ""],
  ])("exit codes and bad output are signals: %s", async (fault, kind, text) => {
    const obs = await readWith(NVSMI_FAULTS[fault]);
    expect(obs.kind).toBe(kind);
    if ("detail" in obs) expect(obs.detail).toContain(text);
  });

  it("times out a hung nvidia-smi (it can hang in D state)", async () => {
    const p = join(dir, "hang.json");
    await writeNvsmiState(p, NVSMI_FAULTS.hang);
    const wrapper = join(dir, "hang.sh");
    writeFileSync(wrapper, `#!/bin/sh\nFAKE_NVSMI_STATE=${p} exec ${FAKE_NVIDIA_SMI_PATH} "$@"\n`);
    chmodSync(wrapper, 0o755);
    const src = new GpuSource(wrapper, 300);
    const t0 = Date.now();
    expect((await src.read()).kind).toBe("timeout");
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  it.each<[NvsmiFault, Partial<Record<string, unknown>>]>([
    ["eccUncorrected", { eccUncorrectedVolatile: 2 }],
    ["rowRemapFailure", { remappedRowsFailure: true }],
    ["rowRemapPending", { remappedRowsPending: true }],
    ["recoveryAction", { recoveryAction: "Reset" }],
    ["thermal", { slowdowns: ["hw_thermal_slowdown"] }],
    ["unknownError", { temperatureC: null }],
  ])("reads the faulted field of %s", async (fault, expected) => {
    const obs = await readWith({ gpuCount: 8, ...NVSMI_FAULTS[fault] });
    expect(obs.kind).toBe("ok");
    if (obs.kind === "ok") expect(obs.gpus[3]).toMatchObject(expected);
  });

  it("corrected ECC errors: read from the fake nvidia-smi as they rise, published as warning facts in coarse steps", async () => {
    const p = join(dir, "ecc.json");
    const wrapper = join(dir, "ecc.sh");
    writeFileSync(wrapper, `#!/bin/sh\nFAKE_NVSMI_STATE=${p} exec ${FAKE_NVIDIA_SMI_PATH} "$@"\n`);
    chmodSync(wrapper, 0o755);
    const src = new GpuSource(wrapper, 3000);
    const tracker = new GpuWarningTracker();
    const t0 = 1_800_000_000_000;
    let seq = 0;
    const seen: (number | null | undefined)[] = [];
    for (const [i, count] of [0, 40, 130].entries()) {
      await writeNvsmiState(p, eccCorrected(count, { gpuCount: 8 }));
      const obs = await src.read();
      expect(obs.kind).toBe("ok");
      if (obs.kind !== "ok") return;
      seen.push(obs.gpus[FAULTED_GPU].eccCorrectedVolatile);
      expect(obs.gpus.filter((_, j) => j !== FAULTED_GPU).every((g) => g.eccCorrectedVolatile === 0)).toBe(true);
      tracker.observe({ seq: ++seq, at: 0, value: obs }, t0 + i * 3_600_000);
    }
    expect(seen).toEqual([0, 40, 130]);
    expect(GPU_FIELDS).toContain("ecc.errors.corrected.volatile.total");
    // 130 corrected errors, risen by 130 in 2 h: published as 100 and 100 (coarse), past the ladder's default threshold.
    expect(tracker.current(t0 + 2 * 3_600_000)).toEqual({ ecc: 100, eccRise: 100, slow: 0 });
  });

  it("tolerates MIG [N/A] utilization and a missing GPU", async () => {
    const mig = await readWith({ gpuCount: 8, ...NVSMI_FAULTS.migNA });
    expect(mig.kind === "ok" && mig.gpus.every((g) => g.utilizationPct === null)).toBe(true);
    const missing = await readWith({ gpuCount: 8, ...NVSMI_FAULTS.gpuMissing });
    expect(missing.kind === "ok" && missing.gpus.length).toBe(7);
  });

  it("drops a field an older driver refuses and asks again", async () => {
    // An old driver: refuses gpu_recovery_action the way nvidia-smi does, answers the rest.
    const p = join(dir, "old.json");
    await writeNvsmiState(p, { gpuCount: 2 });
    const wrapper = join(dir, "old-driver.sh");
    writeFileSync(
      wrapper,
      `#!/bin/sh\ncase "$1" in *gpu_recovery_action*) echo 'Field "gpu_recovery_action" is not a valid field to query.' >&2; exit 2;; esac\nFAKE_NVSMI_STATE=${p} exec ${FAKE_NVIDIA_SMI_PATH} "$@"\n`,
    );
    chmodSync(wrapper, 0o755);
    const src = new GpuSource(wrapper, 3000);
    const obs = await src.read();
    expect(obs.kind).toBe("ok");
    expect(src.droppedFields).toEqual(["gpu_recovery_action"]);
  });

  it("a missing nvidia-smi binary is a failed check, not a crash", async () => {
    const obs = await new GpuSource(join(dir, "no-such-nvidia-smi"), 1000).read();
    expect(obs).toMatchObject({ kind: "failed" });
    if (obs.kind === "failed") expect(obs.detail).toContain("not found");
  });

  it("parses units and markers even without nounits", () => {
    const fields = ["index", "memory.used", "power.draw", "temperature.gpu"];
    const [g] = parseGpuCsv("0, 120 MiB, 69.85 W, [N/A]\n", fields);
    expect(g).toMatchObject({ index: 0, memoryUsedMiB: 120, powerW: 69.85, temperatureC: null });
    expect(() => parseGpuCsv("0, 1\n", fields)).toThrow(/2 columns, expected 4/);
    expect(() => parseGpuCsv("", fields)).toThrow(/no GPU rows/);
    expect(GPU_FIELDS).toContain("gpu_recovery_action");
  });
});

describe("XIDs", () => {
  it("parses the kernel's XID lines and knows fatal from application XIDs", () => {
    expect(parseXidLine("NVRM: Xid (PCI:0000:b3:00.0): 79, pid=1234, name=process, Ch 00000001")).toMatchObject({ code: 79, busId: "0000:b3:00.0" });
    const gsp = parseXidLine(
      "NVRM: Xid (PCI:0002:00:00): 119, pid=1582259, name=nvc:[driver], Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).",
    );
    expect(gsp?.code).toBe(119);
    expect(FATAL_XIDS.has(79) && FATAL_XIDS.has(119) && FATAL_XIDS.has(48)).toBe(true);
    for (const app of [13, 31, 43, 45]) expect(FATAL_XIDS.has(app)).toBe(false);
    expect(parseXidLine("usb 1-1: new device")).toBeNull();
  });

  it("reads only lines written after it started", () => {
    const log = join(dir, "kmsg");
    writeFileSync(log, "NVRM: Xid (PCI:0000:01:00): 79, old news\n");
    const r = new XidReader(log);
    expect(r.read()).toEqual([]);
    writeFileSync(log, readFileSync(log, "utf8") + "NVRM: Xid (PCI:0000:01:00): 48, pid=1\npartial");
    expect(r.read().map((x) => x.code)).toEqual([48]);
    r.close();
  });
});
