/**
 * `npm run observability`: the stack's standby AZ and the Prometheus'
 * selector labels from the command line, so `--cluster prod --standby-az us-east-1c`
 * writes rules that do not fire LlmHaAzCapacityLow for the standby at zero (replayed in
 * promtool), and the operator objects carry the labels the selectors need.
 */
import { parse as parseYaml } from "yaml";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { observabilityFiles, parseCli, type FilesOptions } from "../../infra/observability/cli";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { havePromtool } from "./promql";
import { at, Cases, runPromtoolTests, s, type TestGroup } from "./promtool-cases";

type P = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- parsed JSON

function options(argv: string[]): FilesOptions {
  const r = parseCli(argv);
  if (typeof r === "string" || "help" in r) throw new Error(String(r));
  return r.options;
}

describe("npm run observability", () => {
  it("takes the standby AZ and selector labels", () => {
    const o = options(["--cluster", "prod", "--standby-az", "us-east-1c", "--selector-label", "release=kube-prometheus-stack", "--selector-label", "team=sre", "--prometheus-operator"]);
    expect(o).toEqual({ cluster: "prod", namespace: "llm-ha", standbyAz: "us-east-1c", selectorLabels: { release: "kube-prometheus-stack", team: "sre" }, prometheusOperator: true });
    const files = observabilityFiles(o);
    expect(files["alerts.rules.yml"]).toContain('cluster_az:llmha_az_healthy_capacity:leader{az!="us-east-1c"}');
    const items = (JSON.parse(files["kubernetes.json"]) as { items: P[] }).items;
    const operator = items.filter((i) => i.apiVersion === "monitoring.coreos.com/v1");
    expect(operator.map((i) => `${i.kind} ${i.metadata.name}`).sort()).toEqual(["PodMonitor dcgm-exporter", "PodMonitor inference", "PodMonitor l1-proxy", "PodMonitor llm-ha-agent", "PodMonitor llm-ha-continue", "PodMonitor llm-ha-controller", "PodMonitor llm-ha-fallback", "PrometheusRule llm-ha"]);
    for (const i of operator) expect(i.metadata.labels).toMatchObject({ release: "kube-prometheus-stack", team: "sre" });
    const jobs = parseYaml(files["scrape-configs.yml"]).scrape_configs as P[];
    expect(jobs.every((j) => j.relabel_configs.some((r: P) => r.replacement === "prod"))).toBe(true);
  });

  it("without --prometheus-operator lists ConfigMaps only; refuses bad arguments", () => {
    const items = (JSON.parse(observabilityFiles(options([]))["kubernetes.json"]) as { items: P[] }).items;
    expect(items.map((i) => i.kind)).toEqual(["ConfigMap", "ConfigMap", "ConfigMap", "ConfigMap"]);
    expect(parseCli(["--selector-label", "release"])).toBe('--selector-label "release" must be KEY=VALUE');
    expect(typeof parseCli(["--bogus"])).toBe("string");
    expect(() => observabilityFiles(options(["--standby-az", "us east"]))).toThrow(/standbyAz/);
  });

  it("--runbook-url sets the base every runbook_url points into; the files are block YAML", () => {
    const o = options(["--runbook-url", "https://wiki.example.com/sre/llm-ha"]);
    expect(o.runbookBaseUrl).toBe("https://wiki.example.com/sre/llm-ha");
    const files = observabilityFiles(o);
    const rules = parseYaml(files["alerts.rules.yml"]) as { groups: { rules: { alert?: string; annotations?: { runbook_url: string } }[] }[] };
    const alerts = rules.groups.flatMap((g) => g.rules).filter((r) => r.alert);
    expect(alerts.length).toBeGreaterThan(20);
    for (const a of alerts) expect(a.annotations!.runbook_url).toBe(`https://wiki.example.com/sre/llm-ha#${a.alert!.toLowerCase()}`);
    // Block YAML, not JSON inside a .yml: keys at the line start, no braces around the document.
    for (const name of ["alerts.rules.yml", "scrape-configs.yml", "alertmanager-inhibit.yml"] as const) {
      expect(files[name].startsWith("{"), name).toBe(false);
      expect(files[name]).toMatch(/^[a-z_]+:\n/);
    }
    expect(files["alerts.rules.yml"]).toMatch(/\n {2}- name: /);
    expect(() => observabilityFiles(options(["--runbook-url", "wiki/llm-ha"]))).toThrow(/runbookBaseUrl/);
  });

  it("writes the files and exits 2 on a bad standby AZ (the real command)", () => {
    const out = mkdtempSync(join(tmpdir(), "llmha-obs-cli-"));
    try {
      const run = (args: string[]) => spawnSync("npx", ["tsx", "infra/observability/cli.ts", ...args], { encoding: "utf8", timeout: 60_000 });
      const ok = run(["--out", out, "--cluster", "prod", "--standby-az", "us-east-1c"]);
      expect(ok.status, ok.stderr).toBe(0);
      expect(readFileSync(join(out, "alerts.rules.yml"), "utf8")).toContain('az!="us-east-1c"');
      const bad = run(["--out", out, "--standby-az", "us east"]);
      expect(bad.status).toBe(2);
      expect(bad.stderr).toMatch(/standbyAz "us east" must be an AZ name/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it.skipIf(!havePromtool())("the prod rules with the standby AZ stay silent on the standby at zero and fire on an active AZ (promtool)", () => {
    const groups = alertRuleGroups({ standbyAz: options(["--standby-az", "us-east-1c"]).standbyAz });
    const cases = new Cases(groups);
    const l = { cluster: "prod", az: "us-east-1a", node: "n1" };
    const tests: TestGroup[] = [
      {
        name: "standby at zero at night, us-east-1b degraded",
        interval: "15s",
        input_series: [
          s("llmha_leader", l, "1x40"),
          s("llmha_az_healthy_capacity", { ...l, az: "us-east-1c" }, "0x40"),
          s("llmha_az_total_capacity", { ...l, az: "us-east-1c" }, "16x40"),
          s("llmha_az_healthy_capacity", { ...l, az: "us-east-1b" }, "4x40"),
          s("llmha_az_total_capacity", { ...l, az: "us-east-1b" }, "8x40"),
        ],
        alert_rule_test: [at("5m", "LlmHaAzCapacityLow", cases.fires("LlmHaAzCapacityLow", { cluster: "prod", az: "us-east-1b" }, "50%"))],
      },
    ];
    const r = runPromtoolTests(groups, tests);
    expect(r.code, r.out).toBe(0);
  });
});
