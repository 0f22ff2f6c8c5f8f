/**
 * `npm run observability -- [--out DIR] [--cluster NAME] [--namespace NS]`: writes the
 * alert rules (`alerts.rules.yml`, for `promtool` or a plain Prometheus), the Grafana
 * dashboard (`dashboard.json`, for Grafana's import) and `kubernetes.json` (a List of the
 * objects the stack ships, for `kubectl apply -f` without Pulumi), default thresholds.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { alertRuleGroups } from "./alerts";
import { buildDashboard } from "./dashboard";
import { DASHBOARD_FILE, dashboardConfigMap, dashboardText, podMonitors, prometheusRule, RULES_FILE, rulesConfigMap, rulesFileText } from "./manifests";
import { WORKLOADS_NAMESPACE } from "../names";

export const KUBERNETES_FILE = "kubernetes.json";
/** Where the repository keeps the files for the defaults (a test keeps them current). */
export const GENERATED_DIR = join(__dirname, "generated");

export interface ObservabilityFiles {
  [RULES_FILE]: string;
  [DASHBOARD_FILE]: string;
  [KUBERNETES_FILE]: string;
}

/** The files' contents; `infra/observability/generated/` holds them for the defaults. */
export function observabilityFiles(o: { cluster: string; namespace: string }): ObservabilityFiles {
  const groups = alertRuleGroups();
  const dashboard = buildDashboard();
  const spec = { namespace: o.namespace, clusterName: o.cluster, selectorLabels: {} };
  const items = [rulesConfigMap(o.namespace, groups), dashboardConfigMap(o.namespace, dashboard), prometheusRule(spec, groups), ...podMonitors(spec)];
  return {
    [RULES_FILE]: rulesFileText(groups),
    [DASHBOARD_FILE]: dashboardText(dashboard),
    [KUBERNETES_FILE]: JSON.stringify({ apiVersion: "v1", kind: "List", items }, null, 2) + "\n",
  };
}

function main(argv: string[]): number {
  let values: { out?: string; cluster?: string; namespace?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { out: { type: "string" }, cluster: { type: "string" }, namespace: { type: "string" }, help: { type: "boolean", short: "h" } },
    }));
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write("usage: npm run observability -- [--out DIR (default infra/observability/generated)] [--cluster NAME (default default)] [--namespace NS (default llm-ha)]\n");
    return 0;
  }
  const out = values.out === undefined ? GENERATED_DIR : resolve(values.out);
  mkdirSync(out, { recursive: true });
  const files = observabilityFiles({ cluster: values.cluster ?? "default", namespace: values.namespace ?? WORKLOADS_NAMESPACE });
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(out, name), text);
    process.stdout.write(`wrote ${join(out, name)}\n`);
  }
  return 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
