/**
 * The L1 scrape's cardinality on a REAL HAProxy rendered by the
 * production generator with DNS discovery (3 AZs × 12 `server-template` slots, as a prod
 * pod): the full exporter page carries thousands of series, most of them per-server slots
 * nobody reads; the shipped scrape (`no-maint` + the keep-list of names a rule or panel
 * reads) keeps under a hundred and every name the rules and panels need. The generated
 * `scrape_configs` pass `promtool check config`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../agent/src/util/net";
import { L1_PROXY_NAME } from "../../contracts/names";
import { startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { keepRegex, L1_SCRAPE_PARAMS, scrapeConfigs } from "../../infra/observability/manifests";
import { observabilityObjects } from "../../infra/observability/objects";
import { dnsGroup } from "../../infra/workloads/l1-proxy";
import { havePromtool, promtool } from "./promql";

const AZS = ["us-east-1a", "us-east-1b", "us-east-1c"];
// The prod stack: 12 slots per AZ (the node groups' maxSize), 3 AZs — the largest L1 pod (5,171 series measured with the
// continuation relay's backends, 2,926 without; 53 shipped).
const SLOTS = 12;
const objs = observabilityObjects({ namespace: "llm-ha", clusterName: "prod", prometheusOperator: false, selectorLabels: {} });
let hp: HaproxyHandle;
let monitor = "";
const dir = mkdtempSync(join(tmpdir(), "llmha-l1scrape-"));

beforeAll(async () => {
  monitor = `127.0.0.1:${await freePort()}`;
  hp = await startHaproxy({
    monitorBind: monitor,
    prometheusExporter: true,
    // Nothing answers here: every slot stays unresolved (MAINT), as a prod pod's spare slots do.
    nameservers: ["127.0.0.1:9"],
    proxies: [
      {
        name: L1_PROXY_NAME,
        bind: `127.0.0.1:${await freePort()}`,
        health: "agent",
        forwardAzHealth: true,
        // With the continuation relay, as every L1 pod: its backend, its listener and the relayed backend's rows.
        continuation: { relay: `127.0.0.1:${await freePort()}`, bind: `127.0.0.1:${await freePort()}` },
        servers: { kind: "dns", local: dnsGroup("llm-ha", AZS[0], SLOTS), backup: AZS.slice(1).map((az) => dnsGroup("llm-ha", az, SLOTS)) },
      },
    ],
  });
});

afterAll(async () => {
  await hp?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function samples(query: string): Promise<string[]> {
  const r = await fetch(`http://${monitor}/metrics${query}`, { signal: AbortSignal.timeout(5000) });
  expect(r.status).toBe(200);
  return (await r.text()).split("\n").filter((l) => l && !l.startsWith("#"));
}

/** What Prometheus keeps with `action: keep` on `__name__` (the regex is anchored). */
function kept(lines: string[], regex: string): string[] {
  const re = new RegExp(`^(?:${regex})$`);
  return lines.filter((l) => re.test(l.split(/[{\s]/)[0]));
}

const query = "?" + Object.entries(L1_SCRAPE_PARAMS).map(([k, [v]]) => `${k}=${v}`).join("&");

describe("the L1 proxies' scrape", () => {
  it("keeps under 100 of a prod pod's thousands of series, and every HAProxy name a rule or panel reads", async () => {
    const all = await samples("");
    const perServer = all.filter((l) => l.includes('server="'));
    console.log(`L1 pod, ${AZS.length} AZs × ${SLOTS} slots: ${all.length} series, ${perServer.length} per server`);
    expect(all.length).toBeGreaterThan(2900);
    expect(perServer.length).toBeGreaterThan(2600);

    const shipped = kept(await samples(query), keepRegex(objs.l1Keep));
    console.log(`shipped scrape (no-maint + keep-list of ${objs.l1Keep.length} names): ${shipped.length} series`);
    expect(shipped.length).toBeLessThan(100);
    const names = new Set(shipped.map((l) => l.split(/[{\s]/)[0]));
    expect(objs.l1Keep.filter((n) => !names.has(n) && n !== "haproxy_server_status")).toEqual([]);
    expect(objs.l1Keep).toEqual(expect.arrayContaining(["haproxy_backend_http_responses_total", "haproxy_backend_active_servers", "haproxy_backend_backup_servers", "haproxy_backend_response_errors_total"]));
  });

  it.skipIf(!havePromtool())("the generated scrape_configs pass promtool check config (Debian's build has no Kubernetes SD: static targets stand in)", () => {
    // The DCGM exporter in kube-system; the agents and vLLM in the workloads namespace; the L1 tier (HAProxy, fallback, continuation relay) and the controller in the edge one.
    const edgeJobs = ["llm-ha-controller", "l1-proxy", "llm-ha-fallback", "llm-ha-continue"];
    const jobs = scrapeConfigs({ namespace: "llm-ha", clusterName: "prod" }, objs.l1Keep).map(({ kubernetes_sd_configs: sd, ...j }) => {
      const ns = j.job_name === "dcgm-exporter" ? "kube-system" : edgeJobs.includes(j.job_name as string) ? "llm-ha-edge" : "llm-ha";
      expect(sd, j.job_name as string).toEqual([{ role: "pod", namespaces: { names: [ns] } }]);
      return { ...j, static_configs: [{ targets: ["127.0.0.1:9"] }] };
    });
    const cfg = { global: { scrape_interval: "15s" }, scrape_configs: jobs };
    writeFileSync(join(dir, "prometheus.yml"), JSON.stringify(cfg));
    const r = promtool(["check", "config", "--syntax-only", "prometheus.yml"], dir);
    expect(r.code, r.out).toBe(0);
  });
});
