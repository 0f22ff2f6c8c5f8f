import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { GpuStream } from "../../agent/src/node/sources/gpu-stream";
import type { GpuObservation } from "../../agent/src/node/sources/signals";
import { FAKE_NVIDIA_SMI_PATH, FAULTED_GPU, NVSMI_FAULTS, writeNvsmiState, type NvsmiState } from "../../lab/sim/nvsmi-state";
import { waitFor } from "../../agent/src/util/net";

const dir = mkdtempSync(join(tmpdir(), "llmha-gpu-stream-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const streams: GpuStream[] = [];
afterEach(() => {
  for (const s of streams.splice(0)) s.stop();
});

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));

let seq = 0;
/**
 * nvidia-smi as the agent runs it: the fake on a state file, behind a wrapper that notes each start
 * (its arguments) in `<state>.starts`; `prelude` runs first (an older driver's refusals).
 */
async function node(state: NvsmiState, prelude = ""): Promise<{ state: string; wrapper: string; starts: () => string[] }> {
  const p = join(dir, `n${++seq}.json`);
  await writeNvsmiState(p, state);
  const wrapper = join(dir, `n${seq}.sh`);
  writeFileSync(wrapper, `#!/bin/sh\necho "$*" >> ${p}.starts\n${prelude}\nFAKE_NVSMI_STATE=${p} exec ${FAKE_NVIDIA_SMI_PATH} "$@"\n`);
  chmodSync(wrapper, 0o755);
  return { state: p, wrapper, starts: () => (existsSync(`${p}.starts`) ? readFileSync(`${p}.starts`, "utf8").trimEnd().split("\n") : []) };
}

function open(wrapper: string, periodMs: number, timeoutMs: number, notes: string[] = []): GpuStream {
  const s = new GpuStream({ path: wrapper, periodMs, timeoutMs, onNote: (e, d) => notes.push(`${e}: ${d}`) });
  streams.push(s);
  return s;
}

/** Reads until `pred` holds (each read waits for the next batch or outcome); returns what it saw and when. */
async function readUntil(s: GpuStream, pred: (o: GpuObservation) => boolean, limitMs: number): Promise<{ obs: GpuObservation; ms: number; seen: GpuObservation[] }> {
  const t0 = performance.now();
  const seen: GpuObservation[] = [];
  while (performance.now() - t0 < limitMs) {
    const obs = await s.read();
    seen.push(obs);
    if (pred(obs)) return { obs, ms: performance.now() - t0, seen };
  }
  throw new Error(`not seen within ${limitMs} ms; saw ${seen.map((o) => o.kind).join(", ")}`);
}

describe("nvidia-smi as one long-lived -lms stream (GpuStream)", () => {
  it("one child for every period: each read is the next batch, all 8 GPUs parsed", async () => {
    const n = await node({ gpuCount: 8 });
    const s = open(n.wrapper, 200, 3000);
    const t0 = performance.now();
    const reads: GpuObservation[] = [];
    for (let i = 0; i < 5; i++) reads.push(await s.read());
    const ms = performance.now() - t0;
    expect(reads.every((o) => o.kind === "ok" && o.gpus.length === 8)).toBe(true);
    const first = reads[0];
    if (first.kind === "ok") expect(first.gpus[0]).toMatchObject({ index: 0, temperatureC: 41, powerW: 69.85, memoryTotalMiB: 81559, eccUncorrectedVolatile: 0 });
    // Paced by the stream: 5 batches take about 4 periods, not 5 immediate answers.
    expect(ms).toBeGreaterThanOrEqual(700);
    expect(n.starts()).toHaveLength(1);
    expect(n.starts()[0]).toMatch(/-lms 200$/);
    expect(s.mode).toBe("stream");
  });

  it("a GPU gone from the batch (lost, off the bus) and an ECC error are seen in the next period", async () => {
    const n = await node({ gpuCount: 8 });
    const s = open(n.wrapper, 300, 3000);
    await readUntil(s, (o) => o.kind === "ok", 5000);
    await writeNvsmiState(n.state, { gpuCount: 8, ...NVSMI_FAULTS.gpuMissing });
    const missing = await readUntil(s, (o) => o.kind === "ok" && o.gpus.length === 7, 3000);
    // The next batch, and the short batch ends by its pause (a quarter period), not a period later.
    expect(missing.ms).toBeLessThan(300 + 75 + 250);
    await writeNvsmiState(n.state, { gpuCount: 8, ...NVSMI_FAULTS.eccUncorrected });
    const ecc = await readUntil(s, (o) => o.kind === "ok" && o.gpus.length === 8 && o.gpus[FAULTED_GPU].eccUncorrectedVolatile === 2, 3000);
    expect(ecc.ms).toBeLessThan(300 + 250);
    expect(n.starts()).toHaveLength(1);
  });

  it("a hang (no batch within the deadline) is a timeout, as a hung one-shot call is; the child is killed, a new one started after it is gone", async () => {
    const n = await node({ gpuCount: 8 });
    const s = open(n.wrapper, 200, 400);
    await readUntil(s, (o) => o.kind === "ok", 5000);
    const pid = s.pid!;
    await writeNvsmiState(n.state, { gpuCount: 8, ...NVSMI_FAULTS.hang });
    const hung = await readUntil(s, (o) => o.kind === "timeout", 3000);
    // Due one period after the last batch, late by the 400 ms limit; the last batch may have come just before the state changed.
    expect(hung.ms).toBeLessThan(200 + 200 + 400 + 300);
    if (hung.obs.kind === "timeout") expect(hung.obs.detail).toContain("within 400 ms");
    await waitFor("the hung child killed", () => !alive(pid), { timeoutMs: 2000, everyMs: 20 });
    // While it stays hung the outcome repeats once a period (no batch comes from the new child either).
    const again = await readUntil(s, (o) => o.kind === "timeout", 3000);
    expect(again.obs.kind).toBe("timeout");
    await writeNvsmiState(n.state, { gpuCount: 8 });
    await readUntil(s, (o) => o.kind === "ok" && o.gpus.length === 8, 5000);
    expect(n.starts().length).toBeGreaterThanOrEqual(2);
  });

  it.each([
    ["gpuLost", "gpu-lost", "GPU is lost"],
    ["driverNotLoaded", "driver-not-loaded", "couldn't communicate with the NVIDIA driver"],
    ["driverMismatch", "driver-mismatch", "Driver/library version mismatch"],
  ] as const)("an exit mid-stream means what the exit code means (%s), repeated each period; started again with backoff, back when healed", async (fault, kind, text) => {
    const n = await node({ gpuCount: 8 });
    const s = open(n.wrapper, 150, 2000);
    await readUntil(s, (o) => o.kind === "ok", 5000);
    await writeNvsmiState(n.state, { gpuCount: 8, ...NVSMI_FAULTS[fault] });
    const lost = await readUntil(s, (o) => o.kind === kind, 2000);
    expect(lost.ms).toBeLessThan(150 + 300);
    if ("detail" in lost.obs) expect(lost.obs.detail).toContain(text);
    // Each read while it stays lost is the same outcome, a period apart (the per-tick path's once a period).
    const t = performance.now();
    for (let i = 0; i < 6; i++) expect((await s.read()).kind).toBe(kind);
    expect(performance.now() - t).toBeGreaterThanOrEqual(5 * 150 - 50);
    // Restarts back off: a period, two, then four — fewer starts than reads.
    const starts = n.starts().length;
    expect(starts).toBeGreaterThanOrEqual(2);
    expect(starts).toBeLessThanOrEqual(5);
    await writeNvsmiState(n.state, { gpuCount: 8 });
    const back = await readUntil(s, (o) => o.kind === "ok", 3000);
    expect(back.ms).toBeLessThan(4 * 150 + 500);
  });

  it("garbage in a batch is a garbage outcome; the stream goes on", async () => {
    const n = await node({ gpuCount: 8, ...NVSMI_FAULTS.garbage });
    const s = open(n.wrapper, 150, 2000);
    const g = await readUntil(s, (o) => o.kind === "garbage", 3000);
    expect(g.obs.kind).toBe("garbage");
    await writeNvsmiState(n.state, { gpuCount: 8 });
    await readUntil(s, (o) => o.kind === "ok", 3000);
    expect(n.starts()).toHaveLength(1);
  });

  it("drops a field an older driver refuses, starts again at once and streams without it", async () => {
    const n = await node({ gpuCount: 2 }, `case "$1" in *gpu_recovery_action*) echo 'Field "gpu_recovery_action" is not a valid field to query.' >&2; exit 2;; esac`);
    const notes: string[] = [];
    const s = open(n.wrapper, 150, 2000, notes);
    const first = await s.read();
    expect(first.kind).toBe("ok");
    expect(s.droppedFields).toEqual(["gpu_recovery_action"]);
    expect(notes.join("\n")).toContain("gpu_recovery_action");
    expect((await s.read()).kind).toBe("ok");
    expect(n.starts()).toHaveLength(2);
  });

  it("an nvidia-smi that refuses -lms: the per-tick path takes over by itself, said once, one read a period", async () => {
    const n = await node({ gpuCount: 8 }, `case "$*" in *-lms*) echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."; exit 2;; esac`);
    const notes: string[] = [];
    const s = open(n.wrapper, 150, 2000, notes);
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) expect((await s.read()).kind).toBe("ok");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(2 * 150 - 20);
    expect(s.mode).toBe("per-tick");
    expect(notes.filter((x) => x.startsWith("gpu-stream-refused"))).toHaveLength(1);
    expect(n.starts().filter((a) => !a.includes("-lms"))).toHaveLength(3);
  });

  it("a batch that comes whole in one read sets no timer; one cut between reads is ended by its quiet time", async () => {
    // A timer set at a batch's first row and cleared by its last still woke the process when due.
    const whole = join(dir, "whole.cjs");
    const row = (i: number): string => [i, ...Array(19).fill("0")].join(", ");
    writeFileSync(whole, `#!/usr/bin/env node\nsetInterval(() => process.stdout.write(${JSON.stringify(`${row(0)}\n${row(1)}\n`)}), 200);\n`);
    chmodSync(whole, 0o755);
    const s = open(whole, 200, 2000);
    await s.read(); // the first batch: its width is learned when its quiet time ends it
    await s.read();
    const timers = vi.spyOn(globalThis, "setTimeout");
    try {
      for (let i = 0; i < 4; i++) expect((await s.read()).kind).toBe("ok");
      expect(timers.mock.calls.filter(([, ms]) => ms === 50)).toEqual([]); // quietMs at a 200 ms period
    } finally {
      timers.mockRestore();
    }
    // Rows of one batch in two reads: the second row never comes, the quiet time ends the batch.
    const cut = join(dir, "cut.cjs");
    writeFileSync(cut, `#!/usr/bin/env node\nsetInterval(() => process.stdout.write(${JSON.stringify(`${row(0)}\n`)}), 200);\n`);
    chmodSync(cut, 0o755);
    const c = open(cut, 200, 2000);
    const t0 = performance.now();
    const obs = await c.read();
    expect(obs.kind === "ok" && obs.gpus.length).toBe(1);
    expect(performance.now() - t0).toBeLessThan(1500);
  });

  it("a child printing far faster than asked does not make the agent read (and evaluate) as fast", async () => {
    const fast = join(dir, "fast.cjs");
    writeFileSync(fast, `#!/usr/bin/env node\nconst row = (i) => [i, ...Array(19).fill("0")].join(", ");\nsetInterval(() => process.stdout.write(row(0) + "\\n" + row(1) + "\\n"), 2);\n`);
    chmodSync(fast, 0o755);
    const s = open(fast, 200, 2000);
    const t0 = performance.now();
    let reads = 0;
    while (performance.now() - t0 < 1000) {
      await s.read();
      reads++;
    }
    // At most one a quarter period (about 20 in a second), not one per batch printed (hundreds).
    expect(reads).toBeLessThanOrEqual(25);
  });

  it("a missing nvidia-smi is a failed check, not a crash", async () => {
    const s = open(join(dir, "no-such-nvidia-smi"), 100, 1000);
    const obs = await s.read();
    expect(obs).toMatchObject({ kind: "failed" });
    if (obs.kind === "failed") expect(obs.detail).toContain("not found");
  });

  it("stop() ends the child", async () => {
    const n = await node({ gpuCount: 8 });
    const s = open(n.wrapper, 100, 2000);
    await s.read();
    const pid = s.pid!;
    expect(alive(pid)).toBe(true);
    s.stop();
    await waitFor("the stream child gone", () => !alive(pid), { timeoutMs: 2000, everyMs: 20 });
  });

  it("an agent killed outright (SIGKILL, no stop path) leaves no stream behind", async () => {
    const n = await node({ gpuCount: 8 });
    // A process holding a GpuStream, as the agent does; it prints the stream's pid, then is killed.
    const script = join(dir, "holder.ts");
    writeFileSync(
      script,
      `import { GpuStream } from ${JSON.stringify(join(__dirname, "../../agent/src/node/sources/gpu-stream"))};\n` +
        `const s = new GpuStream({ path: ${JSON.stringify(n.wrapper)}, periodMs: 100, timeoutMs: 2000 });\n` +
        `void s.read().then(() => { console.log(s.pid); setInterval(() => void s.read(), 100); });\n`,
    );
    const holder = spawn(process.execPath, ["--import", "tsx", script], { stdio: ["ignore", "pipe", "inherit"] });
    const pid = await new Promise<number>((resolve, reject) => {
      holder.stdout.setEncoding("utf8").once("data", (d: string) => resolve(Number(d.trim())));
      holder.once("exit", () => reject(new Error("holder exited")));
    });
    expect(alive(pid)).toBe(true);
    holder.kill("SIGKILL");
    await waitFor("the orphaned stream to end", () => !alive(pid), { timeoutMs: 3000, everyMs: 20 });
  });
});
