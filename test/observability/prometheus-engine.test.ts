/**
 * lab/engines/prometheus.ts: a real Prometheus (Debian `prometheus`) scrapes two L1-proxy
 * exporters served here (one AZ failing half its requests, one healthy), evaluates the
 * SHIPPED rules every second, and reports which alerts fired: the page-level availability
 * burn for the failing AZ and the cluster, nothing for the healthy AZ. This is what the
 * drill calls to judge the rules against its real series.
 */
import { spawnSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../agent/src/util/net";
import { startPrometheus, type PrometheusHandle } from "../../lab/engines/prometheus";

const HAVE = spawnSync(process.env.LLMHA_PROMETHEUS ?? "prometheus", ["--version"], { stdio: "ignore", timeout: 10_000 }).status === 0;
if (!HAVE) console.warn("prometheus not found: skipping (apt-get install -y prometheus)");

const t0 = Date.now();
/** HAProxy's L1 counters growing at 100 responses/s, `failing` of them 5xx. */
function exporter(failing: number): Server {
  return createServer((_req, res) => {
    const s = (Date.now() - t0) / 1000;
    // Named as the drill names its AZ proxies; the scrape maps it onto the production backend name.
    const line = (code: string, v: number) => `haproxy_backend_http_responses_total{proxy="az_x_servers",code="${code}"} ${Math.floor(v)}\n`;
    res.setHeader("content-type", "text/plain; version=0.0.4");
    res.end(
      "# TYPE haproxy_backend_http_responses_total counter\n" +
        line("2xx", 100 * (1 - failing) * s) +
        line("5xx", 100 * failing * s) +
        "# TYPE haproxy_backend_active_servers gauge\nhaproxy_backend_active_servers{proxy=\"inference_servers\"} 2\n" +
        "# TYPE haproxy_backend_backup_servers gauge\nhaproxy_backend_backup_servers{proxy=\"inference_servers\"} 2\n",
    );
  });
}

let prom: PrometheusHandle | undefined;
const servers: Server[] = [];

beforeAll(async () => {
  if (!HAVE) return;
  const targets = [];
  for (const [az, failing] of [["az-a", 0.5], ["az-b", 0]] as const) {
    const port = await freePort();
    const srv = exporter(failing);
    await new Promise<void>((r) => srv.listen(port, "127.0.0.1", r));
    servers.push(srv);
    targets.push({
      job: "l1-proxy",
      address: `127.0.0.1:${port}`,
      labels: { cluster: "drill", az },
      metricRelabelConfigs: [{ source_labels: ["proxy"], regex: "az_.+_servers", target_label: "proxy", replacement: "inference_servers" }],
    });
  }
  prom = await startPrometheus({ targets });
}, 30_000);

afterAll(async () => {
  await prom?.stop();
  for (const s of servers) s.close();
});

describe.skipIf(!HAVE)("the shipped rules in a real Prometheus", () => {
  it("fire the availability page for the failing AZ and the cluster, not for the healthy AZ", async () => {
    const from = Date.now();
    await waitFor("targets up", () => prom!.targetsUp(), { timeoutMs: 15_000, everyMs: 250 });
    await waitFor("the burn alert fires", async () => (await prom!.firing()).some((a) => a.labels.alertname === "LlmHaAvailabilityBudgetBurnFast"), { timeoutMs: 30_000, everyMs: 500 });
    const fired = await prom!.fired(from, Date.now());
    const burn = fired.filter((a) => a.alertname === "LlmHaAvailabilityBudgetBurnFast").map((a) => a.labels.az ?? "cluster").sort();
    expect(burn).toEqual(["az-a", "cluster"]);
    expect(fired.filter((a) => a.labels.az === "az-b")).toEqual([]);
    const ratio = await prom!.query('cluster_az:llmha_l1_error_ratio:rate5m{az="az-a"}');
    expect(ratio[0].value).toBeGreaterThan(0.4);
  }, 60_000);
});
