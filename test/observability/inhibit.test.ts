/**
 * Alertmanager inhibition rules shipped beside the alerts, in a REAL
 * Alertmanager (Debian `prometheus-alertmanager`): `amtool check-config` accepts them, and
 * with alerts posted as Prometheus would, a global outage mutes per-node and capacity
 * alerts of its cluster (not of another), a cluster-wide burn mutes the same burn per AZ,
 * a fast burn mutes the slow one. Skipped, with a message, where Alertmanager is missing.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../agent/src/util/net";
import { alertNames, alertRuleGroups } from "../../infra/observability/alerts";
import { inhibitRules } from "../../infra/observability/inhibit";

const BIN = process.env.LLMHA_ALERTMANAGER ?? "prometheus-alertmanager";
const AMTOOL = process.env.LLMHA_AMTOOL ?? "amtool";
const have = (bin: string) => {
  const r = spawnSync(bin, ["--version"], { stdio: "ignore", timeout: 10_000 });
  return !r.error && r.status === 0;
};
const HAVE = have(BIN) && have(AMTOOL);
if (!HAVE) console.warn("Alertmanager not found: skipping the inhibition tests (apt-get install -y prometheus-alertmanager)");

const dir = mkdtempSync(join(tmpdir(), "llmha-am-"));
const config = { route: { receiver: "null", group_by: ["alertname"] }, receivers: [{ name: "null" }], inhibit_rules: inhibitRules() };
writeFileSync(join(dir, "alertmanager.yml"), JSON.stringify(config, null, 2));
let am: ChildProcess | undefined;
let url = "";

beforeAll(async () => {
  if (!HAVE) return;
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  am = spawn(BIN, [`--config.file=${join(dir, "alertmanager.yml")}`, `--storage.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`, "--cluster.listen-address="], {
    stdio: "ignore",
  });
  await waitFor("alertmanager ready", async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.status === 200, { timeoutMs: 20_000, everyMs: 100 });
});

afterAll(() => {
  am?.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

type Labels = Record<string, string>;
const alert = (alertname: string, labels: Labels) => ({ labels: { alertname, ...labels }, annotations: {}, startsAt: new Date().toISOString() });

describe("Alertmanager inhibition rules", () => {
  it("name only alerts the rules ship, and only labels those alerts carry", () => {
    const shipped = new Set(alertNames(alertRuleGroups()));
    for (const r of inhibitRules()) {
      for (const m of [...r.source_matchers, ...r.target_matchers].filter((x) => x.startsWith("alertname"))) {
        const names = /^alertname=~?"(.*)"$/.exec(m)![1].split("|");
        expect(names.filter((n) => !shipped.has(n)), m).toEqual([]);
      }
    }
  });

  it.skipIf(!HAVE)("amtool check-config accepts them", () => {
    const r = spawnSync(AMTOOL, ["check-config", join(dir, "alertmanager.yml")], { encoding: "utf8", timeout: 30_000 });
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    expect(r.stdout).toContain(`${inhibitRules().length} inhibit rules`);
  });

  it.skipIf(!HAVE)("mute what a wider alert explains, in its own cluster only", async () => {
    const posted = [
      alert("LlmHaGlobalOutage", { cluster: "c1", severity: "critical" }),
      alert("LlmHaNodeUnhealthy", { cluster: "c1", az: "a", node: "n1", status: "UNHEALTHY", severity: "warning" }),
      alert("LlmHaAzCapacityLow", { cluster: "c1", az: "a", severity: "warning" }),
      alert("LlmHaZoneFailedOver", { cluster: "c1", severity: "critical" }),
      alert("LlmHaNodeUnhealthy", { cluster: "c2", az: "a", node: "m1", status: "UNHEALTHY", severity: "warning" }),
      alert("LlmHaAvailabilityBudgetBurnFast", { cluster: "c3", slo: "availability", severity: "critical" }),
      alert("LlmHaAvailabilityBudgetBurnFast", { cluster: "c3", az: "a", slo: "availability", severity: "critical" }),
      alert("LlmHaAvailabilityBudgetBurnSlow", { cluster: "c3", slo: "availability", severity: "warning" }),
      alert("LlmHaAvailabilityBudgetBurnSlow", { cluster: "c4", az: "b", slo: "availability", severity: "warning" }),
    ];
    const r = await fetch(`${url}/api/v2/alerts`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(posted) });
    expect(r.status).toBe(200);
    const key = (l: Labels) => [l.alertname, l.cluster, l.az ?? "-"].join(" ");
    let state = new Map<string, string>();
    await waitFor("alerts listed with their inhibition", async () => {
      const list = (await (await fetch(`${url}/api/v2/alerts`)).json()) as { labels: Labels; status: { state: string } }[];
      state = new Map(list.map((a) => [key(a.labels), a.status.state]));
      return state.size === posted.length && [...state.values()].every((s) => s !== "unprocessed");
    }, { timeoutMs: 10_000, everyMs: 100 });
    expect(Object.fromEntries(state)).toEqual({
      "LlmHaGlobalOutage c1 -": "active",
      "LlmHaNodeUnhealthy c1 a": "suppressed",
      "LlmHaAzCapacityLow c1 a": "suppressed",
      "LlmHaZoneFailedOver c1 -": "suppressed",
      "LlmHaNodeUnhealthy c2 a": "active",
      "LlmHaAvailabilityBudgetBurnFast c3 -": "active",
      "LlmHaAvailabilityBudgetBurnFast c3 a": "suppressed",
      "LlmHaAvailabilityBudgetBurnSlow c3 -": "suppressed",
      "LlmHaAvailabilityBudgetBurnSlow c4 b": "active",
    });
  });
});
