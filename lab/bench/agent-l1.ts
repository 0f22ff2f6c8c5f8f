/**
 * L1 numbers: fault → /readyz 503 and fault → HAProxy DOWN/DRAIN per fault kind,
 * beside HAProxy `httpchk GET /health` baselines (default inter 2s fall 3; tuned inter
 * 500ms fall 2) over the same servers in the same HAProxy, in the same run; failed client
 * requests during inference crashes; the agent's own CPU and memory (overhead.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHaproxy, type HaproxyHandle } from "../engines/haproxy";
import type { HaproxyStaticServer } from "../../contracts/haproxy-config";
import { emptyTimeline, l1Removed, type Timeline } from "../drill/timeline";
import { startTraffic, type Traffic } from "../drill/traffic";
import { SimNode } from "../sim/sim-node";
import { freePort, sleep, waitFor } from "../../agent/src/util/net";
import { measured, quantile } from "../../agent/src/util/stats";
import { measureOverhead } from "./overhead";

type FaultKind = "crash" | "gpuLost" | "eccUncorrected" | "wedged" | "slow";
const PROXIES = ["inference", "baseline_default", "baseline_tuned"] as const;
type ProxyName = (typeof PROXIES)[number];

/** Agent at its default periods (interval 1 s); only the recovery ramp is shortened so trials are quick. */
const AGENT_ENV = { LLMHA_WARMUP_STEP_MS: "100", LLMHA_RISE: "1", LLMHA_PROBE_LATENCY_MS: "1500", LLMHA_DRAIN_MS: "300" };
/** How long a trial waits for a switch before calling it "never". */
const WINDOW_MS = 8000;

export interface Percentiles {
  n: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
  never: number;
}

/** n, p50, p99 and max (rounded ms) of the measured values, and how many never happened. */
export function pct(values: (number | null)[]): Percentiles {
  const seen = measured(values);
  const at = (p: number): number | null => {
    const q = quantile(seen, p);
    return q === null ? null : Math.round(q);
  };
  return { n: values.length, p50: at(0.5), p99: at(0.99), max: seen.length ? Math.round(seen[seen.length - 1]) : null, never: values.length - seen.length };
}

/** Out of rotation (the drill's definition), or — for a slow engine, which stays in — weight lowered. */
async function serverOut(hp: HaproxyHandle, proxy: ProxyName, server: string, lowered = false): Promise<boolean> {
  const row = (await hp.stats()).find((s) => s.proxy === `${proxy}_servers` && s.server === server);
  return !!row && (l1Removed(row) || (lowered && row.weight < 100));
}

/** Failed and sent requests of each proxy's client since `from` (ms on the traffic clock). */
function counts(timeline: Timeline, sentBefore: Record<string, number>, from: number): { failed: Record<ProxyName, number>; sent: Record<ProxyName, number> } {
  const failed = {} as Record<ProxyName, number>;
  const sent = {} as Record<ProxyName, number>;
  for (const p of PROXIES) {
    failed[p] = timeline.failures.filter((x) => x.client === p && x.t >= from).length;
    sent[p] = (timeline.sent[p] ?? 0) - (sentBefore[p] ?? 0);
  }
  return { failed, sent };
}

async function inject(n: SimNode, f: FaultKind): Promise<void> {
  if (f === "crash") await n.crashInference();
  else if (f === "wedged") await n.setMode("wedged");
  else if (f === "slow") await n.setMode({ mode: "slow", slowMs: 4000 });
  else await n.gpuFault(f);
}

async function heal(n: SimNode, f: FaultKind): Promise<void> {
  if (f === "crash") await n.startInference("ready");
  else if (f === "wedged") {
    // A wedged engine is healed by restarting it, which also drops the requests it holds.
    await n.crashInference();
    await n.startInference("ready");
  } else if (f === "slow") await n.setMode("ready");
  else await n.gpuFault(null);
}

export interface L1Options {
  trials?: number;
  faults?: FaultKind[];
  /** The overhead window, s (default 300: the goal is stated over 5 minutes). */
  overheadSeconds?: number;
  log?: (line: string) => void;
}

export async function runL1Bench(o: L1Options = {}): Promise<Record<string, unknown>> {
  const trials = o.trials ?? 20;
  const faults = o.faults ?? ["crash", "gpuLost", "eccUncorrected", "wedged", "slow"];
  const log = o.log ?? ((l: string) => process.stderr.write(l + "\n"));
  const dir = mkdtempSync(join(tmpdir(), "llmha-bench-l1-"));
  const nodes: SimNode[] = [];
  let hp: HaproxyHandle | null = null;
  let traffic: Traffic | null = null;
  const timeline = emptyTimeline();
  const clockZero = performance.now();
  const clock = (): number => performance.now() - clockZero;
  try {
    const [a, b] = await SimNode.startAll([
      { id: "gpu-a", az: "az-a", dir, env: AGENT_ENV },
      { id: "gpu-b", az: "az-a", dir, env: AGENT_ENV },
    ]);
    nodes.push(a, b);
    const srv = (n: SimNode): HaproxyStaticServer => ({ name: n.id, address: "127.0.0.1", port: n.inferencePort, agentPort: n.agentCheckPort, httpPort: n.httpPort });
    const binds = {} as Record<ProxyName, string>;
    for (const p of PROXIES) binds[p] = `127.0.0.1:${await freePort()}`;
    hp = await startHaproxy({
      proxies: PROXIES.map((p) => ({
        name: p,
        bind: binds[p],
        health: p === "inference" ? "agent" : p === "baseline_default" ? "httpchk-default" : "httpchk-tuned",
        tuning: { slowstartMs: 0 },
        servers: { kind: "static", local: [srv(a), srv(b)], backup: [] },
      })),
    });
    const h = hp;
    // Every trial starts from full service: HEALTHY at full weight everywhere (not still
    // DEGRADED or ramping from the previous trial, which a slow-engine trial would count).
    const allUp = async (): Promise<boolean> => {
      for (const p of PROXIES) if (await serverOut(h, p, "gpu-a", p === "inference")) return false;
      const st = await a.agentGet("/status");
      return st.body.status === "HEALTHY" && st.body.weight === 100;
    };
    await waitFor("gpu-a up everywhere", allUp, { timeoutMs: 30_000, everyMs: 100 });
    // 20 requests/s through each proxy, the drill's traffic generator.
    traffic = startTraffic({
      clients: PROXIES.map((p) => ({ name: p, target: () => `http://${binds[p]}`, workers: 1 })),
      timeline,
      now: clock,
      model: "llm-ha/test-model",
      gapMs: 50,
      timeoutMs: 5000,
    });
    const results: Record<string, unknown> = {};
    for (const f of faults) {
      const readyz: (number | null)[] = [];
      const out: Record<ProxyName, (number | null)[]> = { inference: [], baseline_default: [], baseline_tuned: [] };
      const from = clock();
      const sentBefore = { ...timeline.sent };
      const afterThreshold: (number | null)[] = [];
      for (let t = 0; t < trials; t++) {
        await sleep(300 + Math.random() * 700); // de-phase from the check periods
        const t0 = performance.now();
        await inject(a, f);
        const seen: { readyz: number | null } & Record<ProxyName, number | null> = { readyz: null, inference: null, baseline_default: null, baseline_tuned: null };
        while (performance.now() - t0 < WINDOW_MS) {
          if (seen.readyz === null) {
            // A slow engine is DEGRADED (serves at lower weight): detection is the status change.
            const r = f === "slow" ? await a.agentGet("/status").catch(() => null) : await a.agentGet("/readyz").catch(() => null);
            if (r && (f === "slow" ? r.body.status !== "HEALTHY" : r.status === 503)) {
              seen.readyz = performance.now() - t0;
              // The probe that tripped it, as the agent saw it: how long past the threshold it had run.
              const inFlight = (r.body as { probe?: { inFlightMs?: number | null } }).probe?.inFlightMs;
              if (f === "slow") afterThreshold.push(typeof inFlight === "number" ? inFlight - Number(AGENT_ENV.LLMHA_PROBE_LATENCY_MS) : null);
            }
          }
          for (const p of PROXIES) if (seen[p] === null && (await serverOut(h, p, "gpu-a", f === "slow"))) seen[p] = performance.now() - t0;
          const baselinesCanSee = f === "crash";
          if (seen.readyz !== null && seen.inference !== null && (!baselinesCanSee || (seen.baseline_default !== null && seen.baseline_tuned !== null))) break;
          if (!baselinesCanSee && seen.readyz !== null && seen.inference !== null && performance.now() - t0 > 6000) break;
          await sleep(10);
        }
        readyz.push(seen.readyz);
        for (const p of PROXIES) out[p].push(seen[p]);
        await heal(a, f);
        await waitFor("gpu-a back everywhere", allUp, { timeoutMs: 60_000, everyMs: 100 });
      }
      const c = counts(timeline, sentBefore, from);
      results[f] = {
        /** Fault → agent /readyz 503 (slow: → /status not HEALTHY). */
        detectMs: pct(readyz),
        ...(f === "slow" ? { detectAfterThresholdMs: pct(afterThreshold) } : {}),
        haproxyOutMs: { agent: pct(out.inference), baselineDefault: pct(out.baseline_default), baselineTuned: pct(out.baseline_tuned) },
        failedRequests: { agent: c.failed.inference, baselineDefault: c.failed.baseline_default, baselineTuned: c.failed.baseline_tuned },
        requestsSent: c.sent,
      };
      log(`l1 ${f}: readyz p50 ${pct(readyz).p50} ms${f === "slow" ? ` (${pct(afterThreshold).p50} ms after the probe passed the threshold)` : ""}, HAProxy out p50 ${pct(out.inference).p50} ms (baseline tuned ${pct(out.baseline_tuned).p50 ?? "never"}), failed ${c.failed.inference}/${c.failed.baseline_default}/${c.failed.baseline_tuned}`);
    }
    await traffic.stop();
    traffic = null;
    // The agent's own cost with 8 GPUs and every signal on, against its goal (overhead.ts).
    results.overhead = await measureOverhead({ seconds: o.overheadSeconds ?? 300, dir, log });
    return { trials, windowMs: WINDOW_MS, agentSettings: { intervalMs: 1000, agentInterMs: 500, ...AGENT_ENV }, faults: results };
  } finally {
    await traffic?.stop();
    await hp?.stop();
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const quick = process.argv.includes("--quick");
  runL1Bench(quick ? { trials: 3, overheadSeconds: 10 } : {}).then(
    (r) => process.stdout.write(JSON.stringify(r, null, 2) + "\n"),
    (e: unknown) => {
      process.stderr.write(`bench failed: ${(e as Error).stack}\n`);
      process.exit(1);
    },
  );
}
