import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GpuSource, pciKey, readPciGpus } from "../../agent/src/node/sources/gpu";
import { defaultMetricsUrl, parseEngineMetrics } from "../../agent/src/node/sources/engine-metrics";
import { ADAPTERS, request } from "../../agent/src/node/sources/inference";
import { parseXidLine } from "../../agent/src/node/sources/xid";
import { parseXidRules, XidJudge, XidRulesError } from "../../agent/src/node/sources/xid-rules";
import { engineReasons, gpuReasons, pciReasons, probeWithEngine, probeReasons, type RuleSettings } from "../../agent/src/node/evaluator/rules";
import type { EngineObservation, GpuObservation, ProbeObservation, Sample } from "../../agent/src/node/sources/signals";
import { ConfigError, parseConfig } from "../../agent/src/config/load";
import { FAKE_NVIDIA_SMI_PATH, NVSMI_FAULTS, writeNvsmiState, type NvsmiState } from "../../lab/sim/nvsmi-state";
import { startFakeInference, type FakeInference } from "../../lab/sim/fake-inference";

/**
 * The GPU and engine signals (NVLink fabric, GPUs off the bus, windowed XIDs, busy is not dead,
 * engine progress for every kind, corrupted weights), each on real-shaped input.
 */
const dir = mkdtempSync(join(tmpdir(), "llmha-signals16-"));
const fakes: FakeInference[] = [];
afterAll(async () => {
  await Promise.all(fakes.map((f) => f.close()));
  rmSync(dir, { recursive: true, force: true });
});

const S: RuleSettings = { gpuCount: 8, model: "m", probeLatencyMs: 1000, wedgeMs: 500, probeStuckMs: 4000 };

async function smi(state: NvsmiState): Promise<GpuObservation> {
  const p = join(dir, `s-${Math.random()}.json`);
  await writeNvsmiState(p, state);
  const wrapper = join(dir, `nvsmi-${Math.random()}.sh`);
  writeFileSync(wrapper, `#!/bin/sh\nFAKE_NVSMI_STATE=${p} exec ${FAKE_NVIDIA_SMI_PATH} "$@"\n`);
  chmodSync(wrapper, 0o755);
  return new GpuSource(wrapper, 5000).read();
}

describe("NVLink fabric (fabric.state / fabric.status from nvidia-smi)", () => {
  it("reads Completed/Success on the healthy capture: no reason", async () => {
    const obs = await smi({});
    expect(obs.kind).toBe("ok");
    if (obs.kind !== "ok") return;
    expect(obs.gpus[0]).toMatchObject({ fabricState: "Completed", fabricStatus: "Success" });
    expect(gpuReasons(obs, S)).toEqual([]);
  });
  it.each(["fabricNotRegistered", "fabricError"] as const)("%s on one GPU is a hard GPU_FABRIC", async (fault) => {
    const obs = await smi(NVSMI_FAULTS[fault]);
    const r = gpuReasons(obs, S);
    expect(r).toHaveLength(1);
    expect(r[0]).toMatchObject({ code: "GPU_FABRIC", hard: true, effect: "unhealthy" });
    expect(r[0].detail).toMatch(/^GPU 3: fabric /);
  });
  it("a system without a fabric (Not Supported) has no verdict", async () => {
    const obs = await smi({ overrides: { "*": { "fabric.state": "[Not Supported]", "fabric.status": "[Not Supported]" } } });
    expect(obs.kind === "ok" && obs.gpus[0].fabricState).toBeNull();
    expect(gpuReasons(obs, S)).toEqual([]);
  });
});

describe("a GPU off the PCI bus", () => {
  /** A sysfs PCI folder: the 8 GPUs of the H100 capture (bus ids from nvidia-smi), 4 NVSwitches, a NIC. */
  function sysfs(gpuBusIds: string[]): string {
    const root = mkdtempSync(join(dir, "pci-"));
    const dev = (name: string, vendor: string, cls: string): void => {
      mkdirSync(join(root, name));
      writeFileSync(join(root, name, "vendor"), `${vendor}\n`);
      writeFileSync(join(root, name, "class"), `${cls}\n`);
    };
    for (const b of gpuBusIds) dev(pciKey(b), "0x10de", "0x030200");
    for (let i = 0; i < 4; i++) dev(`0000:0${i}:01.0`, "0x10de", "0x068000");
    dev("0000:20:00.0", "0x1d0f", "0x020000");
    return root;
  }
  it("counts NVIDIA GPUs only (not NVSwitches, not other vendors), in sysfs form", async () => {
    const obs = await smi({});
    const ids = obs.kind === "ok" ? obs.gpus.map((g) => g.busId!) : [];
    const pci = readPciGpus(sysfs(ids));
    expect(pci).toEqual({ kind: "ok", busIds: ids.map(pciKey).sort() });
    expect(pciKey("00000000:53:00.0")).toBe("0000:53:00.0");
    expect(pciReasons(pci, obs, S)).toEqual([]);
  });
  it("a GPU gone from the bus while nvidia-smi still lists it (no XID) is a hard GPU_OFF_BUS", async () => {
    const obs = await smi({});
    const ids = obs.kind === "ok" ? obs.gpus.map((g) => g.busId!) : [];
    const r = pciReasons(readPciGpus(sysfs(ids.filter((_, i) => i !== 3))), obs, S);
    expect(r.map((x) => [x.code, x.hard])).toEqual([["GPU_OFF_BUS", true]]);
    expect(r[0].detail).toContain(`7 of 8 GPUs on the PCI bus (gone: ${ids[3]})`);
  });
  it("a GPU on the bus that the driver does not list is GPU_MISSING even without LLMHA_GPU_COUNT", async () => {
    const all = await smi({});
    const ids = all.kind === "ok" ? all.gpus.map((g) => g.busId!) : [];
    const seven = await smi(NVSMI_FAULTS.gpuMissing);
    const r = pciReasons(readPciGpus(sysfs(ids)), seven, { ...S, gpuCount: null });
    expect(r.map((x) => x.code)).toEqual(["GPU_MISSING"]);
  });
  it("read every period, each device's files are read once: a GPU that leaves is gone at the next read, one that comes is read then", async () => {
    const obs = await smi({});
    const ids = obs.kind === "ok" ? obs.gpus.map((g) => pciKey(g.busId!)) : [];
    const root = sysfs(ids);
    const known = new Map<string, boolean>();
    expect(readPciGpus(root, known)).toEqual({ kind: "ok", busIds: [...ids].sort() });
    expect(known.size).toBe(ids.length + 5);
    // The files are not read again: a vendor file emptied now changes nothing for a device already known.
    writeFileSync(join(root, ids[0], "vendor"), "");
    expect(readPciGpus(root, known)).toEqual({ kind: "ok", busIds: [...ids].sort() });
    rmSync(join(root, ids[3]), { recursive: true });
    expect(readPciGpus(root, known)).toEqual({ kind: "ok", busIds: ids.filter((_, i) => i !== 3).sort() });
    expect(known.has(ids[3])).toBe(false);
    // Back on the bus (a new folder): read again.
    mkdirSync(join(root, ids[3]));
    writeFileSync(join(root, ids[3], "vendor"), "0x10de\n");
    writeFileSync(join(root, ids[3], "class"), "0x030200\n");
    expect(readPciGpus(root, known)).toEqual({ kind: "ok", busIds: [...ids].sort() });
    // Without the map (a read on its own) the files are read: the emptied vendor is not NVIDIA's.
    const fresh = readPciGpus(root);
    expect(fresh.kind === "ok" ? fresh.busIds : []).not.toContain(ids[0]);
  });
  it("no NVIDIA GPU listed (no sysfs, a test machine) or an unreadable folder: no verdict", () => {
    expect(pciReasons(readPciGpus(join(dir, "nope")), undefined, S)).toEqual([]);
    expect(readPciGpus(join(dir, "nope")).kind).toBe("error");
    expect(pciReasons({ kind: "ok", busIds: [] }, undefined, S)).toEqual([]);
  });
});

describe("windowed XID rules", () => {
  const line = (code: number, pid = true, bus = "0000:53:00"): string =>
    `[12345.678901] NVRM: Xid (PCI:${bus}): ${code}, ${pid ? "pid=4242, name=python3, " : "pid='<unknown>', name=<unknown>, "}Ch 00000001`;
  const xid = (code: number, pid = true, bus?: string) => parseXidLine(line(code, pid, bus))!;

  it("fatal at once and sticky; application XIDs with a process never act", () => {
    const j = new XidJudge(parseXidRules(null));
    expect(j.add(xid(13), 0)).toBe("app");
    expect(j.add(xid(31), 0)).toBe("app");
    expect(j.verdict(0)).toEqual({ fatal: [], repeated: [] });
    j.add(xid(79), 10);
    expect(j.verdict(99_999_999).fatal.map((x) => x.code)).toEqual([79]);
  });
  it("a windowed XID counts only at k within the window, per GPU, and clears when the window passes", () => {
    const j = new XidJudge(parseXidRules(null));
    j.add(xid(94), 0);
    j.add(xid(94, true, "0000:54:00"), 1000);
    j.add(xid(94), 2000);
    expect(j.verdict(2000).repeated).toEqual([]);
    j.add(xid(94), 3000);
    expect(j.verdict(3000).repeated).toEqual([{ code: 94, busId: "0000:53:00", count: 3, windowMs: 3_600_000 }]);
    expect(j.verdict(3_600_001).repeated).toEqual([]);
  });
  it("an application XID without a process context counts as windowed (5 in 10 min)", () => {
    const j = new XidJudge(parseXidRules(null));
    for (let i = 0; i < 4; i++) j.add(xid(13, false), i);
    expect(j.verdict(10).repeated).toEqual([]);
    j.add(xid(13, false), 5);
    expect(j.verdict(10).repeated.map((x) => x.count)).toEqual([5]);
  });
  it("LLMHA_XID_RULES overrides the table; bad entries name the problem and stop start-up", () => {
    const rules = parseXidRules("94=2/30s, 13=fatal, 79=ignore");
    expect(rules.get(94)).toEqual({ count: 2, windowMs: 30_000 });
    expect(rules.get(13)).toBe("fatal");
    expect(rules.get(79)).toBe("ignore");
    expect(rules.get(48)).toBe("fatal");
    expect(() => parseXidRules("94=often")).toThrow(XidRulesError);
    expect(() => parseXidRules("x")).toThrow(/CODE=ACTION/);
    const env = { LLMHA_AZ: "a", LLMHA_XID_RULES: "94=3/10parsecs" };
    expect(() => parseConfig([], env)).toThrow(ConfigError);
    expect(() => parseConfig([], env)).toThrow(/LLMHA_XID_RULES \(--xid-rules\): XID 94/);
    expect(parseConfig([], { LLMHA_AZ: "a", LLMHA_XID_RULES: "94=3/10m" }).xidRules).toBe("94=3/10m");
  });
  it("reads /dev/kmsg records (priority, sequence, time; then the message)", () => {
    const x = parseXidLine("3,2291,96571233,-;NVRM: Xid (PCI:0000:b3:00): 79, pid=1234, name=python3, GPU has fallen off the bus.");
    expect(x).toMatchObject({ code: 79, busId: "0000:b3:00" });
  });
});

describe("engine progress metrics, every family", () => {
  const TGI = `# TYPE tgi_queue_size gauge\ntgi_queue_size 12\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 32\n# TYPE tgi_batch_inference_count counter\ntgi_batch_inference_count{method="decode"} 5102\ntgi_batch_inference_count{method="prefill"} 311\n# TYPE tgi_request_generated_tokens_sum counter\ntgi_request_generated_tokens_sum 98211\n`;
  const TRITON = `nv_inference_pending_request_count{model="ensemble",version="1"} 4\nnv_inference_exec_count{model="ensemble",version="1"} 100\nnv_trt_llm_general_metrics{general_type="iteration_counter",model="tensorrt_llm",version="1"} 7000\nnv_trt_llm_general_metrics{general_type="timestamp",model="tensorrt_llm",version="1"} 1764441283900\n`;
  const LLAMA = `llamacpp:prompt_tokens_total 10\nllamacpp:tokens_predicted_total 20\nllamacpp:n_decode_total 5\nllamacpp:requests_processing 2\nllamacpp:requests_deferred 3\n`;
  const SGLANG = `sglang:num_queue_reqs{model_name="m"} 7\nsglang:num_running_reqs{model_name="m"} 9\nsglang:generation_tokens_total{model_name="m"} 400\nsglang:prompt_tokens_total{model_name="m"} 100\nsglang:token_usage{model_name="m"} 0.5\n`;
  it.each([
    ["tgi", TGI, { waiting: 12, running: 32, tokensTotal: 5102 + 311 + 98211 }],
    ["triton", TRITON, { waiting: 4, running: 0, tokensTotal: 7100 }],
    ["llamacpp", LLAMA, { waiting: 3, running: 2, tokensTotal: 35 }],
    ["sglang", SGLANG, { waiting: 7, running: 9, tokensTotal: 500, kvCacheUsage: 0.5 }],
  ])("%s: queue, batch and progress counters (the timestamp series is not progress)", (family, text, want) => {
    expect(parseEngineMetrics(text)).toMatchObject({ family, ...want });
  });
  it("the fake of each kind exports its family, and the default metrics URL is the kind's", async () => {
    for (const kind of ["vllm", "tgi", "triton", "llamacpp"] as const) {
      const f = await startFakeInference({ kind, model: "m" });
      fakes.push(f);
      const r = await request(`${f.url}/metrics`, 2000);
      expect("text" in r && parseEngineMetrics(r.text)?.family).toBe(kind);
    }
    expect(defaultMetricsUrl("vllm", "http://127.0.0.1:8000")).toBe("http://127.0.0.1:8000/metrics");
    expect(defaultMetricsUrl("triton", "http://10.0.0.5:8000")).toBe("http://10.0.0.5:8002/metrics");
    expect(defaultMetricsUrl("openai", "http://127.0.0.1:8000")).toBeNull();
  });
});

describe("busy ≠ dead, stuck for every kind", () => {
  const eng = (at: number, waiting: number, tokens: number, running = 8): Sample<EngineObservation | null> => ({ seq: 1, at, value: { family: "vllm", running, waiting, kvCacheUsage: 0.5, tokensTotal: tokens } });
  const probe = (at: number, v: ProbeObservation): Sample<ProbeObservation> => ({ seq: 2, at, value: v });

  it("a queue with the counters still for wedgeMs (between engine samples) is ENGINE_WEDGED", () => {
    expect(engineReasons(eng(1400, 3, 100), 1000, S)).toEqual([]);
    expect(engineReasons(eng(1500, 3, 100), 1000, S)[0]).toMatchObject({ code: "ENGINE_WEDGED", hard: true });
    // Nothing waiting: not wedged however still the counters are.
    expect(engineReasons(eng(9000, 0, 100), 1000, S)).toEqual([]);
  });
  it("a probe waiting behind a queue while tokens flow is ENGINE_BUSY (degraded), never PROBE_STUCK", () => {
    const p = probe(6000, { kind: "in-flight", elapsedMs: 5000 });
    const own = probeReasons(p.value, S);
    const r = probeWithEngine(own, p, 1000, eng(5900, 900, 5000), 5900, 6000, S);
    expect(r.map((x) => [x.code, x.effect])).toEqual([["ENGINE_BUSY", "degraded"]]);
    const t = probe(6000, { kind: "timeout", elapsedMs: 5000 });
    expect(probeWithEngine(probeReasons(t.value, S), t, null, eng(5900, 900, 5000), 5900, 6000, S).map((x) => x.code)).toEqual(["ENGINE_BUSY"]);
  });
  it("a probe in flight past the bound with no progress, or no metrics at all, is a hard PROBE_STUCK", () => {
    const p = probe(5000, { kind: "in-flight", elapsedMs: 4000 });
    const noMetrics = probeWithEngine(probeReasons(p.value, S), p, 1000, undefined, null, 5000, S);
    expect(noMetrics.map((x) => [x.code, x.hard])).toEqual([["PROBE_STUCK", true]]);
    expect(noMetrics[0].detail).toContain("no engine metrics");
    const still = probeWithEngine(probeReasons(p.value, S), p, 1000, eng(4900, 0, 100, 1), 900, 5000, S);
    expect(still.map((x) => x.code)).toEqual(["PROBE_STUCK"]);
    expect(probeWithEngine(probeReasons(p.value, S), p, 1000, undefined, null, 4999, S).map((x) => x.code)).toEqual(["PROBE_SLOW"]);
  });
  it("a run of timed-out probes shorter than the bound each is PROBE_STUCK once the run passes it (probe timeout < probeStuckMs)", () => {
    // Probes time out at 1.5 s; the first of the run started at 1000. At 4000 the third runs: 3 s unanswered, not yet.
    const inFlight = probe(4000, { kind: "in-flight", elapsedMs: 800 });
    expect(probeWithEngine(probeReasons(inFlight.value, S), inFlight, 3200, undefined, null, 4000, S, 1000).map((x) => x.code)).toEqual(["PROBE_SLOW"]);
    // At 5000: unanswered for 4 s, whether a probe runs or the last one just timed out.
    expect(probeWithEngine(probeReasons(inFlight.value, S), inFlight, 3200, undefined, null, 5000, S, 1000).map((x) => [x.code, x.hard])).toEqual([["PROBE_STUCK", true]]);
    const timedOut = probe(5000, { kind: "timeout", elapsedMs: 1500 });
    expect(probeWithEngine(probeReasons(timedOut.value, S), timedOut, null, undefined, null, 5000, S, 1000).map((x) => x.code)).toEqual(["PROBE_STUCK"]);
    // Before the fix, each probe's own start was the only clock: never stuck.
    expect(probeWithEngine(probeReasons(timedOut.value, S), timedOut, null, undefined, null, 5000, S).map((x) => x.code)).toEqual(["PROBE_TIMEOUT"]);
    // Busy: a probe that has just started in the run, before any engine sample since its start, while tokens flow for the whole run and work is queued, is not stuck.
    const justStarted = probe(5000, { kind: "in-flight", elapsedMs: 10 });
    expect(probeWithEngine(probeReasons(justStarted.value, S), justStarted, 4990, eng(4950, 300, 9000), 4900, 5000, S, 1000).map((x) => x.code)).not.toContain("PROBE_STUCK");
    // An answered probe (the run ended) is judged on its own.
    const ok = probe(5000, { kind: "ok", latencyMs: 200 });
    expect(probeWithEngine(probeReasons(ok.value, S), ok, null, undefined, null, 5000, S, null)).toEqual([]);
  });
  it("a queue that has just drained after a run of busy timeouts is not PROBE_STUCK: the bound counts from the last progress (the `burst` fault)", () => {
    // Timeouts since 1000 while 1,000 requests queued; the burst ended at 9000 (last progress), the queue is empty now.
    const timedOut = probe(9100, { kind: "timeout", elapsedMs: 1500 });
    const idle = eng(9200, 0, 50_000, 0);
    expect(probeWithEngine(probeReasons(timedOut.value, S), timedOut, null, idle, 9000, 9300, S, 1000).map((x) => x.code)).not.toContain("PROBE_STUCK");
    // The probe queued before the end, still in flight a moment after it: not stuck either.
    const queued = probe(9300, { kind: "in-flight", elapsedMs: 1200 });
    expect(probeWithEngine(probeReasons(queued.value, S), queued, 8100, idle, 9000, 9300, S, 1000).map((x) => x.code)).not.toContain("PROBE_STUCK");
    // Still unanswered 4 s after the last progress: stuck after all.
    expect(probeWithEngine(probeReasons(timedOut.value, S), timedOut, null, idle, 9000, 13_000, S, 1000).map((x) => x.code)).toContain("PROBE_STUCK");
    // A new probe sent just before the burst's last tokens (at 8800, within wedgeMs of 9000): those tokens may
    // look like its own prefill, but they moved with the queue still full (progress with others): not stuck.
    const late = probe(9300, { kind: "in-flight", elapsedMs: 500 });
    expect(probeWithEngine(probeReasons(late.value, S), late, 8800, idle, 9000, 9300, S, 1000, 9000).map((x) => x.code)).not.toContain("PROBE_STUCK");
    // Without the others' progress (an engine that served only the probe since 1000) it is stuck.
    expect(probeWithEngine(probeReasons(late.value, S), late, 8800, idle, 9000, 9300, S, 1000, 800).map((x) => x.code)).toContain("PROBE_STUCK");
  });
  it("the probe's own prompt counted at its start, then stillness, is not flow: an engine hung mid-decode is PROBE_STUCK", () => {
    const p = probe(5000, { kind: "in-flight", elapsedMs: 4000 });
    // Counters last moved at 1010 (the probe's prefill), sampled still since; only the probe runs.
    expect(probeWithEngine(probeReasons(p.value, S), p, 1000, eng(4900, 0, 100, 1), 1010, 5000, S).map((x) => x.code)).toEqual(["PROBE_STUCK"]);
    // A slow engine with only the probe in it is slow, not busy.
    const q = probe(1300, { kind: "in-flight", elapsedMs: 1100 });
    expect(probeWithEngine(probeReasons(q.value, S), q, 200, eng(1250, 0, 100, 1), 1200, 1300, S).map((x) => x.code)).toEqual(["PROBE_SLOW"]);
  });
});

describe("corrupted weights", () => {
  it("Triton: a model that failed to load is MODEL_LOAD_FAILED from the repository index", async () => {
    const f = await startFakeInference({ kind: "triton", model: "m", mode: "failed-load" });
    fakes.push(f);
    const obs = await ADAPTERS.triton.check(f.url, "m", 2000);
    expect(obs.kind).toBe("load-failed");
    await f.setMode("loading");
    expect((await ADAPTERS.triton.check(f.url, "m", 2000)).kind).toBe("not-ready");
  });
  it("vLLM: a server that fails to load never listens (the agent sees it down, or loading at boot)", async () => {
    const f = await startFakeInference({ kind: "vllm", model: "m", mode: "failed-load" });
    fakes.push(f);
    expect((await ADAPTERS.vllm.check(f.url, "m", 1000)).kind).toBe("refused");
  });
  it("a model that loads but answers garbage: the probe's answer fails LLMHA_PROBE_EXPECT", async () => {
    const f = await startFakeInference({ kind: "vllm", model: "m", mode: "corrupt" });
    fakes.push(f);
    const req = ADAPTERS.vllm.probe(f.url, "m", 2, "The capital of France is")!;
    const r = await request(req.url, 2000, req.body);
    const answer = "text" in r ? req.answer(r.text) : null;
    expect(answer).toBe("!!");
    expect(new RegExp(parseConfig([], { LLMHA_AZ: "a", LLMHA_PROBE_EXPECT: "ok|Paris" }).probeExpect!).test(answer!)).toBe(false);
    expect(probeReasons({ kind: "wrong-answer", latencyMs: 5, detail: "x" }, S)[0]).toMatchObject({ code: "PROBE_WRONG_ANSWER", hard: false, effect: "unhealthy" });
    expect(() => parseConfig([], { LLMHA_AZ: "a", LLMHA_PROBE_EXPECT: "(" })).toThrow(/LLMHA_PROBE_EXPECT .*not a valid regular expression/);
  });
});
