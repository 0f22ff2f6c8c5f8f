import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { FAKE_NVIDIA_SMI_PATH, FAULTED_GPU, NVSMI_FAULTS, writeFakeNvidiaSmiWrapper, writeNvsmiState } from "../../lab/sim/nvsmi-state";
import { sleep, waitFor } from "../../agent/src/util/net";

const dir = mkdtempSync(join(tmpdir(), "llmha-nvsmi-stream-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const QUERY = ["--query-gpu=index,uuid,ecc.errors.uncorrected.volatile.total", "--format=csv,noheader,nounits"];
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

interface Stream {
  child: ChildProcess;
  /** Batches so far: the rows from one index 0 to the next. */
  batches: string[][];
  stderr: () => string;
  exit: Promise<number | null>;
}

/** Starts `-lms` as the agent does (through `cmd`, the fake or its wrapper) and collects its batches. */
function stream(cmd: string, periodMs: number, env: NodeJS.ProcessEnv): Stream {
  const child = spawn(cmd, [...QUERY, "-lms", String(periodMs)], { env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  const batches: string[][] = [];
  let err = "";
  let partial = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => {
    const lines = (partial + d).split("\n");
    partial = lines.pop()!;
    for (const l of lines) {
      if (l.startsWith("0,") || batches.length === 0) batches.push([l]);
      else batches.at(-1)!.push(l);
    }
  });
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return { child, batches, stderr: () => err, exit };
}

describe("fake nvidia-smi -lms (the agent's stream)", () => {
  it("prints one batch of every GPU each period until killed", async () => {
    const state = join(dir, "steady.json");
    await writeNvsmiState(state, { gpuCount: 8 });
    const s = stream(FAKE_NVIDIA_SMI_PATH, 200, { ...process.env, FAKE_NVSMI_STATE: state });
    await waitFor("4 batches", () => s.batches.length >= 4, { timeoutMs: 10_000, everyMs: 20 });
    for (const b of s.batches) expect(b.map((l) => l.split(", ")[0])).toEqual(["0", "1", "2", "3", "4", "5", "6", "7"]);
    expect(s.child.exitCode).toBeNull();
    s.child.kill("SIGTERM");
    await s.exit;
  });

  it("follows the state file as it changes: ECC and a missing GPU in the next batch, a hang prints nothing, GPU lost ends it with 15", async () => {
    const state = join(dir, "faults.json");
    await writeNvsmiState(state, { gpuCount: 8 });
    const s = stream(FAKE_NVIDIA_SMI_PATH, 100, { ...process.env, FAKE_NVSMI_STATE: state });
    await waitFor("a first batch", () => s.batches.length >= 1, { timeoutMs: 10_000, everyMs: 10 });

    await writeNvsmiState(state, { gpuCount: 8, ...NVSMI_FAULTS.eccUncorrected });
    await waitFor("the ECC error", () => s.batches.at(-1)?.[FAULTED_GPU].endsWith(", 2") ?? false, { timeoutMs: 2000, everyMs: 10 });

    await writeNvsmiState(state, { gpuCount: 8, ...NVSMI_FAULTS.gpuMissing });
    await waitFor("7 rows", () => s.batches.at(-1)?.length === 7, { timeoutMs: 2000, everyMs: 10 });

    await writeNvsmiState(state, { gpuCount: 8, ...NVSMI_FAULTS.hang });
    await sleep(250);
    const during = s.batches.length;
    await sleep(500);
    expect(s.batches.length, "nothing while hung").toBe(during);
    expect(s.child.exitCode).toBeNull();

    await writeNvsmiState(state, { gpuCount: 8, ...NVSMI_FAULTS.gpuLost });
    expect(await s.exit).toBe(15);
    expect(s.stderr()).toContain("GPU is lost");
  });

  it("through the drill's wrapper: streams (never answered from the cache, nothing cached) and ends with its reader", async () => {
    const state = join(dir, "wrapped.json");
    await writeNvsmiState(state, { gpuCount: 8 });
    const wrapper = writeFakeNvidiaSmiWrapper(join(dir, "nvidia-smi.sh"), state);
    const s = stream(wrapper, 100, { PATH: process.env.PATH });
    await waitFor("3 batches", () => s.batches.length >= 3, { timeoutMs: 10_000, everyMs: 10 });
    expect(readdirSync(`${state}.c`).filter((f) => f.endsWith(".code"))).toEqual([]);
    // The reader goes away (an agent killed with SIGKILL): the next write fails and the fake ends.
    const pid = s.child.pid!;
    s.child.stdout!.destroy();
    await waitFor("the stream to end", () => !existsSync(`/proc/${pid}`) || s.child.exitCode !== null, { timeoutMs: 3000, everyMs: 20 });
  });

  it("refuses -lms with -L (usage error, exit 2), as nvidia-smi does for combinations it does not know", async () => {
    const child = spawn(FAKE_NVIDIA_SMI_PATH, ["-L", "-lms", "100"], { env: { ...process.env, FAKE_NVSMI_STATE: join(dir, "none.json") } });
    children.push(child);
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    expect(code).toBe(2);
    expect(out).toContain("Invalid combination of input arguments");
  });
});
