import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { FAKE_NVIDIA_SMI_PATH, NVSMI_FAULTS, writeFakeNvidiaSmiWrapper, writeNvsmiState, type NvsmiFault } from "../../lab/sim/nvsmi-state";

// The agent's own query shape: one --query-gpu list and the csv format.
const ARGS = ["--query-gpu=index,uuid,pci.bus_id,temperature.gpu,ecc.errors.uncorrected.volatile.total,remapped_rows.pending,fabric.state", "--format=csv,noheader,nounits"];
const dir = mkdtempSync(join(tmpdir(), "llmha-nvsmi-wrapper-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function call(cmd: string, statePath: string | null, args = ARGS): { code: number | null; out: string; err: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", env: statePath ? { ...process.env, FAKE_NVSMI_STATE: statePath } : { PATH: process.env.PATH } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe("the fake nvidia-smi's wrapper cache (lab/sim/nvsmi-state.ts)", () => {
  const faults = (Object.keys(NVSMI_FAULTS) as NvsmiFault[]).filter((f) => f !== "hang");

  it("answers from the cache exactly what the fake answers, for every fault, and follows each state change", async () => {
    const state = join(dir, "node.json");
    const wrapper = writeFakeNvidiaSmiWrapper(join(dir, "nvidia-smi.sh"), state);
    // Healthy → each fault → healthy again: a stale entry would answer the previous state.
    for (const f of [null, ...faults, null] as Array<NvsmiFault | null>) {
      await writeNvsmiState(state, { gpuCount: 8, ...(f ? NVSMI_FAULTS[f] : {}) });
      const direct = call(FAKE_NVIDIA_SMI_PATH, state);
      const first = call(wrapper, null);
      const cached = call(wrapper, null);
      expect(first, `${f ?? "healthy"}: first call`).toEqual(direct);
      expect(cached, `${f ?? "healthy"}: from the cache`).toEqual(direct);
    }
    // Other arguments are another entry, never the first one's answer.
    const other = ["--query-gpu=index,uuid", "--format=csv,noheader"];
    expect(call(wrapper, null, other)).toEqual(call(FAKE_NVIDIA_SMI_PATH, state, other));
    expect(readdirSync(`${state}.c`).filter((x) => x.endsWith(".code")).length).toBeGreaterThan(faults.length);
  });

  it("never caches a hang: the delay is the fault", async () => {
    const state = join(dir, "hang.json");
    const wrapper = writeFakeNvidiaSmiWrapper(join(dir, "hang.sh"), state);
    await writeNvsmiState(state, { gpuCount: 8, hangMs: 300 });
    for (let i = 0; i < 2; i++) {
      const t = performance.now();
      expect(call(wrapper, null).code).toBe(0);
      expect(performance.now() - t).toBeGreaterThanOrEqual(290);
    }
  });
});
