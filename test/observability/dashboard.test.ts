/**
 * The Grafana dashboard: the panels an on-call SRE needs, a layout Grafana accepts, every
 * query valid PromQL for the real `promtool`, and the committed copies in `observability/`
 * equal to what the code generates.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GENERATED_DIR, observabilityFiles } from "../../infra/observability/cli";
import { buildDashboard, dashboardExprs, type DashboardPanel } from "../../infra/observability/dashboard";
import { havePromtool, promtool } from "./promql";
import { alertRuleGroups, alertRules, alertThresholds } from "../../infra/observability/alerts";
import { dashboardRows } from "../../infra/observability/panels";

const d = buildDashboard();
const rows = d.panels.filter((p) => p.type === "row");
const panels = d.panels.filter((p) => p.type !== "row");
const dir = mkdtempSync(join(tmpdir(), "llmha-dash-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Panels under the row titled `row`. */
function inRow(row: string): DashboardPanel[] {
  const start = d.panels.findIndex((p) => p.type === "row" && p.title === row);
  expect(start, row).toBeGreaterThanOrEqual(0);
  const next = d.panels.findIndex((p, i) => i > start && p.type === "row");
  return d.panels.slice(start + 1, next < 0 ? undefined : next);
}

describe("Grafana dashboard", () => {
  it("has the rows and panels an on-call engineer reads first", () => {
    // User impact first, then the tier and AZ states, then the alerts table.
    expect(rows.map((r) => r.title)).toEqual(["User impact", "Fleet at a glance", "Alerts", "Nodes and AZs", "Detection and failover", "Probe and engine", "GPUs", "L1 proxy (HAProxy)", "Standby AZ and practice wakes", "L4 fallback (llm-ha fallback)", "Stream continuation (llm-ha continue)", "Agents, models and cloud actions", "Rollout"]);
    const titles = (row: string) => inRow(row).map((p) => p.title);
    expect(titles("User impact")).toEqual([
      "Requests",
      "Availability vs SLO",
      "Error budget left (30 d)",
      "Budget burn rate (1 h)",
      "Time to first token P95",
      "End-to-end latency P95",
      "Retries, redispatches, cut streams",
      "Queued in the proxy",
      "Latency SLO: fast first tokens",
      "Failed requests",
    ]);
    // The user-impact row fills the first screen: nothing of it below y = 25.
    for (const p of inRow("User impact")) expect(p.gridPos.y + p.gridPos.h, p.title).toBeLessThanOrEqual(26);
    expect(titles("Fleet at a glance")).toEqual(expect.arrayContaining(["Failure tier", "Leader", "Fencing token"]));
    expect(titles("Nodes and AZs")).toEqual(expect.arrayContaining(["Nodes by AZ and status", "AZ healthy capacity", "AZ state"]));
    expect(titles("Detection and failover")).toEqual(expect.arrayContaining(["Detection time, last fault", "Controller action time P95"]));
    expect(titles("Probe and engine")).toEqual(expect.arrayContaining(["Probe latency P95"]));
    expect(titles("GPUs")).toEqual(expect.arrayContaining(["GPU temperature", "GPU power", "Uncorrected ECC errors"]));
    expect(titles("L1 proxy (HAProxy)")).toEqual(expect.arrayContaining(["Error ratio", "Servers by state", "Servers up"]));
  });

  it("templates the data source, cluster and AZ, and every query follows cluster", () => {
    expect(d.templating.list.map((v) => v.name)).toEqual(["datasource", "cluster", "az"]);
    for (const p of panels) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) {
        expect(t.datasource.uid).toBe("${datasource}");
        expect(t.expr, p.title).toContain('cluster=~"$cluster"');
      }
    }
  });

  it("lays panels out on Grafana's 24-column grid without overlaps, ids unique", () => {
    expect(new Set(d.panels.map((p) => p.id)).size).toBe(d.panels.length);
    const cells = new Set<string>();
    for (const p of d.panels) {
      const g = p.gridPos;
      expect(g.x + g.w, p.title).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++) {
        for (let y = g.y; y < g.y + g.h; y++) {
          const k = `${x},${y}`;
          expect(cells.has(k), `${p.title} overlaps at ${k}`).toBe(false);
          cells.add(k);
        }
      }
    }
  });

  it.skipIf(!havePromtool())("every query is PromQL promtool accepts", () => {
    // Grafana's variables as Prometheus would see them after substitution.
    const exprs = dashboardExprs(d).map((e) => e.replaceAll("$__rate_interval", "1m").replaceAll("$cluster", ".*").replaceAll("$az", ".*"));
    expect(exprs.join("\n")).not.toContain("$");
    const file = { groups: [{ name: "dashboard", rules: exprs.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })) }] };
    writeFileSync(join(dir, "dashboard.rules.yml"), JSON.stringify(file));
    const r = promtool(["check", "rules", "dashboard.rules.yml"], dir);
    expect(r.out).toContain(`SUCCESS: ${exprs.length} rules found`);
  });
});

describe("infra/observability/generated/ in the repository", () => {
  it("has a panel for every shipped alert, reading that alert's own series", () => {
    /** The series a query reads, recording rules named by the series they record (`cluster:x:leader` → x). */
    const series = (expr: string): Set<string> =>
      new Set(
        [...expr.matchAll(/[a-zA-Z_][a-zA-Z0-9_:]*(?=\s*[{[)\s=<>*/+-]|$)/g)]
          .flatMap((x) => x[0].split(":"))
          .filter((n) => /^(llmha_|haproxy_|up$)/.test(n) && n !== "llmha_leader"),
      );
    const specs = dashboardRows(alertThresholds()).flatMap((r) => r.panels);
    const alerts = alertRules(alertRuleGroups());
    const names = new Set(alerts.map((a) => a.alert));
    for (const p of specs) for (const a of p.alerts ?? []) expect(names.has(a), `${p.title} names ${a}, which is no alert`).toBe(true);
    const missing: string[] = [];
    for (const a of alerts) {
      const own = series(a.expr);
      const shown = specs.filter((p) => p.alerts?.includes(a.alert));
      if (shown.length === 0) missing.push(`${a.alert}: no panel`);
      for (const p of shown) {
        const read = series(p.queries.map((q) => q.expr).join(" "));
        // LlmHaNoLeader reads only llmha_leader: its panel reads it too.
        const ok = own.size === 0 ? p.queries.some((q) => q.expr.includes("llmha_leader")) : [...own].some((n) => read.has(n));
        if (!ok) missing.push(`${a.alert}: panel ${p.title} reads none of ${[...own].join(", ")}`);
      }
    }
    expect(missing).toEqual([]);
    // Units and value mappings a person reads: the token whole, the sleeping standby named, the fallback's tier named.
    const byTitle = (t: string) => panels.find((p) => p.title === t)!;
    expect(byTitle("Fencing token").fieldConfig?.defaults).toMatchObject({ unit: "none", decimals: 0 });
    expect(JSON.stringify(byTitle("Standby AZ").fieldConfig)).toContain('"0":{"text":"asleep"');
    expect(JSON.stringify(byTitle("Standby AZ").fieldConfig)).toContain('"1":{"text":"awake"');
    expect(JSON.stringify(byTitle("Fallback's view of the tier").fieldConfig)).toContain("L4 active");
    expect(inRow("L4 fallback (llm-ha fallback)").length).toBeGreaterThanOrEqual(5);
  });

  it("holds what `npm run observability` writes (run it after changing alerts or panels)", () => {
    const files = observabilityFiles({ cluster: "default", namespace: "llm-ha" });
    for (const [name, text] of Object.entries(files)) {
      const committed = readFileSync(join(GENERATED_DIR, name), "utf8");
      expect(committed === text, `infra/observability/generated/${name} is stale: npm run observability`).toBe(true);
    }
  });
});
