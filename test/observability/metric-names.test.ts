/**
 * Every metric name an alert or a dashboard panel reads must be one the software really
 * exports: a REAL agent process (fake nvidia-smi and inference server, real Redis, leading
 * the fleet) and a REAL HAProxy rendered by the same generator as production, both scraped.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { HaproxyConfigError, renderHaproxyConfig } from "../../contracts/haproxy-config";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { SimNode } from "../../lab/sim/sim-node";
import { freePort, waitFor } from "../../agent/src/util/net";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { buildDashboard, dashboardExprs } from "../../infra/observability/dashboard";
import { exportedFamilies, isExported, metricNames, SYNTHETIC, type ExportedPage } from "./promql";
import { L1_BACKEND, L1_PROXY_NAME } from "../../contracts/names";

const dir = mkdtempSync(join(tmpdir(), "llmha-obs-"));
let redis: RedisServerHandle;
let node: SimNode;
let hp: HaproxyHandle;
let agentText = "";
let haproxyText = "";

const groups = alertRuleGroups();
const alertExprs = groups.flatMap((g) => g.rules.map((r) => ({ where: "alert" in r ? `alert ${r.alert}` : `record ${r.record}`, expr: r.expr })));
/** Series the rules record themselves. */
const RECORDED = new Set(groups.flatMap((g) => g.rules.flatMap((r) => ("record" in r ? [r.record] : []))));
/**
 * vLLM's histograms the SLOs and panels read: the inference servers export them (vllm
 * v0.6+ `/metrics`, prometheus_client); the fake inference server does not, so they are
 * checked against this list of vLLM's names instead of a scrape.
 */
const VLLM_HISTOGRAMS = new Set(["vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"]);
const panelExprs = dashboardExprs(buildDashboard()).map((expr) => ({ where: "dashboard", expr }));

async function scrape(url: string): Promise<string> {
  const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
  expect(r.status).toBe(200);
  return r.text();
}

beforeAll(async () => {
  redis = await startRedisServer();
  node = await SimNode.start({
    id: "gpu-obs-1",
    az: "az-obs-a",
    dir,
    env: {
      LLMHA_REDIS_URL: redis.url,
      LLMHA_CLUSTER: `obs-${randomBytes(4).toString("hex")}`,
      LLMHA_INTERVAL_MS: "250",
      LLMHA_LEASE_TTL_MS: "3000",
      LLMHA_LEASE_RENEW_MS: "1000",
      LLMHA_LEASE_CONTEND_MS: "500",
      // An actuator behind the fencing gate exports the controller-action series. Nothing
      // listens at its URL: a wake-up of the (empty) standby AZ fails, which is counted too.
      LLMHA_ACTUATOR: "local",
      LLMHA_LOCAL_CLOUD_URL: "http://127.0.0.1:9",
      LLMHA_STANDBY_AZ: "az-obs-b",
      // Practice wakes export their series (the practice-wake alerts read them); the cron never fires in the test.
      LLMHA_PRACTICE_WAKE: "0 4 29 2 *",
    },
  });
  const monitor = `127.0.0.1:${await freePort()}`;
  const bind = `127.0.0.1:${await freePort()}`;
  hp = await startHaproxy({
    monitorBind: monitor,
    prometheusExporter: true,
    proxies: [
      {
        name: L1_PROXY_NAME,
        bind,
        health: "agent",
        forwardAzHealth: true,
        servers: { kind: "static", local: [{ name: node.id, address: "127.0.0.1", port: node.inferencePort, agentPort: node.agentCheckPort, httpPort: node.httpPort }], backup: [] },
      },
    ],
  });
  // The agent leads (fleet and controller series set) and a request went through HAProxy.
  // Leading (the lease) comes before the first evaluation: on a loaded machine a scrape between the two had no AZ state yet.
  await waitFor("agent leads and publishes its AZ's state", async () => {
    const text = await scrape(`${node.agentUrl}/metrics`);
    return /^llmha_leader\{[^}]*\} 1$/m.test(text) && /^llmha_az_state\{az="az-obs-a",[^}]*\} 1$/m.test(text);
  }, { timeoutMs: 30_000, everyMs: 200 });
  await waitFor("a completion through HAProxy", async () => {
    const r = await fetch(`http://${bind}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "llm-ha/test-model", prompt: "x", max_tokens: 1 }) });
    await r.arrayBuffer();
    return r.status === 200;
  }, { timeoutMs: 20_000, everyMs: 250 });
  agentText = await scrape(`${node.agentUrl}/metrics`);
  haproxyText = await scrape(`http://${monitor}/metrics`);
});

afterAll(async () => {
  await hp?.stop();
  await node?.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function missing(exprs: { where: string; expr: string }[], pages: { agent: ExportedPage; haproxy: ExportedPage }): string[] {
  const out: string[] = [];
  for (const { where, expr } of exprs) {
    for (const name of metricNames(expr)) {
      if (SYNTHETIC.has(name) || RECORDED.has(name)) continue;
      // The L4 fallback's own series: checked against a real fallback's metrics listener in fallback-alerts.test.ts.
      if (name.startsWith("llmha_fallback_")) continue;
      // The continuation relay's: against a real relay's metrics listener in continuation-alerts.test.ts.
      if (name.startsWith("llmha_continue_")) continue;
      if (name.startsWith("vllm:")) {
        if (!VLLM_HISTOGRAMS.has(name.replace(/_(bucket|count|sum)$/, "")) || !/_(bucket|count|sum)$/.test(name)) out.push(`${where}: ${name}`);
        continue;
      }
      const page = name.startsWith("haproxy_") ? pages.haproxy : pages.agent;
      if (!isExported(name, page)) out.push(`${where}: ${name}`);
    }
  }
  return out;
}

describe("metric names in alerts and dashboard", () => {
  it("finds the names in the expressions (the extractor itself)", () => {
    expect(metricNames('histogram_quantile(0.95, sum by (cluster, le) (rate(llmha_probe_latency_seconds_bucket{az=~"$az"}[5m]))) > 2')).toEqual([
      "llmha_probe_latency_seconds_bucket",
    ]);
    expect(metricNames('(llmha_tier_level and on (cluster, node) (llmha_leader{cluster=~"$cluster"} == 1)) >= 2')).toEqual(["llmha_leader", "llmha_tier_level"]);
    expect(metricNames('absent(up{job="llm-ha-agent"})')).toEqual(["up"]);
    const names = new Set([...alertExprs, ...panelExprs].flatMap((e) => metricNames(e.expr)));
    expect(names.size).toBeGreaterThan(30);
  });

  it("every name an alert or a panel reads is exported by the real agent or the real HAProxy", () => {
    const pages = { agent: exportedFamilies(agentText), haproxy: exportedFamilies(haproxyText) };
    expect(pages.agent.families.size).toBeGreaterThan(30);
    expect(pages.haproxy.families.size).toBeGreaterThan(50);
    expect(missing([...alertExprs, ...panelExprs], pages)).toEqual([]);
    // The check can fail: a name neither exports is reported, and so is a histogram read without `_bucket`.
    const wrong = "rate(llmha_no_such_total[5m]) + haproxy_no_such + rate(llmha_probe_latency_seconds[5m])";
    expect(missing([{ where: "x", expr: wrong }], pages)).toEqual(["x: haproxy_no_such", "x: llmha_no_such_total", "x: llmha_probe_latency_seconds"]);
  });

  it("the agent labels its own series with node and az (what the rules group by)", () => {
    const samples = agentText.split("\n").filter((l) => l.startsWith("llmha_"));
    expect(samples.length).toBeGreaterThan(50);
    for (const l of samples) expect(l, l).toMatch(/node="gpu-obs-1"/);
    expect(samples.filter((l) => !/az="[^"]+"/.test(l))).toEqual([]);
    // The leader's AZ series keep the AZ they describe.
    expect(agentText).toMatch(/^llmha_az_state\{az="az-obs-a",state="(OK|DEGRADED|DOWN)",node="gpu-obs-1"\} 1$/m);
  });

  it("HAProxy's exporter needs the monitor frontend it is served on", () => {
    const proxies = [{ name: "p", bind: "127.0.0.1:1", health: "agent" as const, servers: { kind: "static" as const, local: [], backup: [{ name: "s", address: "127.0.0.1", port: 2, agentPort: 3, httpPort: 4 }] } }];
    expect(() => renderHaproxyConfig({ prometheusExporter: true, proxies })).toThrow(HaproxyConfigError);
  });

  it("HAProxy counts the L1 backend's 5xx under the label the rules select", () => {
    expect(haproxyText).toMatch(new RegExp(`^haproxy_backend_http_responses_total\\{proxy="${L1_BACKEND}",code="5xx"\\} \\d+$`, "m"));
    expect(haproxyText).toMatch(new RegExp(`^haproxy_backend_http_responses_total\\{proxy="${L1_BACKEND}",code="2xx"\\} [1-9]\\d*$`, "m"));
  });
});
