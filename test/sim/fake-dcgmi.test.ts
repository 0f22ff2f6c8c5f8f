/**
 * The fake dcgmi (lab/sim/fake-dcgmi.cjs) through its wrapper, as the agent runs it (a minimal
 * environment): `diag -r 1 -j` passes, fails the test and GPU the state names, fails when the
 * GPU is lost (nvidia-smi failing), takes its delay, and refuses anything else; the agent's
 * parser reads each answer as it reads DCGM's.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDiag, runDiag } from "../../agent/src/node/sources/dcgmi";
import { FAULTED_GPU, NVSMI_FAULTS, writeFakeDcgmiWrapper, writeNvsmiState } from "../../lab/sim/nvsmi-state";
import { execFile } from "node:child_process";

let dir: string;
let state: string;
let wrapper: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "fake-dcgmi-"));
  state = join(dir, "node.nvsmi.json");
  wrapper = writeFakeDcgmiWrapper(join(dir, "dcgmi.sh"), state);
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe("fake dcgmi", () => {
  it("passes on a healthy node, one software result per GPU present", async () => {
    await writeNvsmiState(state, { gpuCount: 4, diagDelayMs: 0 });
    expect(await runDiag(wrapper, 10_000)).toEqual({ kind: "passed", tests: 1 });
  });

  it("fails the test and GPU of the diagFail fault, with its message, after the configured delay", async () => {
    await writeNvsmiState(state, { ...NVSMI_FAULTS.diagFail, diagDelayMs: 600 });
    const t0 = Date.now();
    const r = await runDiag(wrapper, 10_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(600);
    expect(r).toEqual({ kind: "failed", failures: [{ test: "software", gpu: FAULTED_GPU, message: NVSMI_FAULTS.diagFail.diagFail.message }] });
  });

  it("fails on a lost GPU (nvidia-smi failing) with nvidia-smi's error text", async () => {
    await writeNvsmiState(state, { ...NVSMI_FAULTS.gpuLost, diagDelayMs: 0 });
    const r = await runDiag(wrapper, 10_000);
    expect(r).toMatchObject({ kind: "failed", failures: [{ test: "software", gpu: 0, message: expect.stringContaining("GPU is lost") }] });
  });

  it("a diag past its time limit is killed and reported as not run", async () => {
    await writeNvsmiState(state, { diagDelayMs: 5000 });
    expect(await runDiag(wrapper, 300)).toEqual({ kind: "error", detail: "dcgmi diag -r 1 did not finish within 300 ms" });
  });

  it("refuses any other command with a usage error and no JSON", async () => {
    const r = await new Promise<{ code: number | null; stdout: string }>((resolve) =>
      execFile(wrapper, ["diag", "-r", "3", "-j"], (err, stdout) => resolve({ code: err ? Number(err.code) : 0, stdout })),
    );
    expect(r.code).toBe(2);
    expect(parseDiag(r.code, r.stdout)).toMatchObject({ kind: "error" });
  });
});
