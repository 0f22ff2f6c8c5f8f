/**
 * `npm run observability -- [--out DIR] [--cluster NAME] [--namespace NS] [--standby-az AZ]
 * [--selector-label K=V]... [--prometheus-operator]`: writes the rules (`alerts.rules.yml`,
 * for `promtool` or a plain Prometheus), the Grafana dashboard (`dashboard.json`), the
 * scrape jobs (`scrape-configs.yml`), Alertmanager's inhibition rules
 * (`alertmanager-inhibit.yml`) and `kubernetes.json` (a List of the objects the stack ships,
 * for `kubectl apply -f` without Pulumi).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { inhibitText } from "./inhibit";
import { DASHBOARD_FILE, dashboardText, INHIBIT_FILE, RULES_FILE, rulesFileText, SCRAPE_FILE, scrapeConfigs, yamlText } from "./manifests";
import { observabilityObjects } from "./objects";
import { AlertThresholdError } from "./thresholds";
import { WORKLOADS_NAMESPACE } from "../names";
import { flagErrorMessage } from "../../contracts/did-you-mean";

export const KUBERNETES_FILE = "kubernetes.json";
/** Where the repository keeps the files for the defaults (a test keeps them current). */
export const GENERATED_DIR = join(__dirname, "generated");

export interface ObservabilityFiles {
  [RULES_FILE]: string;
  [DASHBOARD_FILE]: string;
  [SCRAPE_FILE]: string;
  [INHIBIT_FILE]: string;
  [KUBERNETES_FILE]: string;
}

export interface FilesOptions {
  cluster: string;
  namespace: string;
  /** The stack's standby AZ (`llm-ha:standbyAz`): left out of `LlmHaAzCapacityLow`. */
  standbyAz?: string | null;
  /** Labels your Prometheus' selectors need on the operator objects. */
  selectorLabels?: Record<string, string>;
  /** Also list the PrometheusRule and the PodMonitors (needs prometheus-operator's CRDs). */
  prometheusOperator?: boolean;
  /** Page every alert's \`runbook_url\` points into (stack setting \`llm-ha:observability.runbookBaseUrl\`). Default the repository's docs/observability.md. */
  runbookBaseUrl?: string;
}

/** The files' contents; `infra/observability/generated/` holds them for the defaults. */
export function observabilityFiles(o: FilesOptions): ObservabilityFiles {
  const objs = observabilityObjects({
    namespace: o.namespace,
    clusterName: o.cluster,
    prometheusOperator: o.prometheusOperator ?? false,
    selectorLabels: o.selectorLabels ?? {},
    thresholds: { standbyAz: o.standbyAz ?? null, ...(o.runbookBaseUrl ? { runbookBaseUrl: o.runbookBaseUrl } : {}) },
  });
  const items = [...objs.configMaps, ...objs.operator];
  return {
    [RULES_FILE]: rulesFileText(objs.groups),
    [DASHBOARD_FILE]: dashboardText(objs.dashboard),
    [SCRAPE_FILE]: yamlText({ scrape_configs: scrapeConfigs({ namespace: o.namespace, clusterName: o.cluster }, objs.l1Keep) }),
    [INHIBIT_FILE]: inhibitText(),
    [KUBERNETES_FILE]: JSON.stringify({ apiVersion: "v1", kind: "List", items }, null, 2) + "\n",
  };
}

const USAGE =
  "usage: npm run observability -- [--out DIR (default infra/observability/generated)] [--cluster NAME (default default)]\n" +
  "         [--namespace NS (default llm-ha; the L1 tier and the controller are scraped in NS-edge)] [--standby-az AZ] [--selector-label KEY=VALUE]... [--prometheus-operator]\n" +
  "         [--runbook-url BASE (each alert's runbook_url is BASE#<alert name in lower case>; default the repository's\n" +
  "          docs/observability.md; the stack setting is llm-ha:observability.runbookBaseUrl)]\n";

/** Parses the arguments into file options and an output folder; a string is the error to print (exit 2). */
export function parseCli(argv: string[]): { out?: string; options: FilesOptions } | { help: true } | string {
  let values: { out?: string; cluster?: string; namespace?: string; "standby-az"?: string; "selector-label"?: string[]; "prometheus-operator"?: boolean; "runbook-url"?: string; help?: boolean };
  const options = {
    out: { type: "string" },
    cluster: { type: "string" },
    namespace: { type: "string" },
    "standby-az": { type: "string" },
    "selector-label": { type: "string", multiple: true },
    "prometheus-operator": { type: "boolean" },
    "runbook-url": { type: "string" },
    help: { type: "boolean", short: "h" },
  } as const;
  try {
    ({ values } = parseArgs({ args: argv, options }));
  } catch (e) {
    return flagErrorMessage(e, Object.keys(options));
  }
  if (values.help) return { help: true };
  const selectorLabels: Record<string, string> = {};
  for (const kv of values["selector-label"] ?? []) {
    const m = /^([A-Za-z0-9_./-]+)=(.*)$/.exec(kv);
    if (!m) return `--selector-label ${JSON.stringify(kv)} must be KEY=VALUE`;
    selectorLabels[m[1]] = m[2];
  }
  return {
    out: values.out,
    options: {
      cluster: values.cluster ?? "default",
      namespace: values.namespace ?? WORKLOADS_NAMESPACE,
      standbyAz: values["standby-az"] ?? null,
      selectorLabels,
      prometheusOperator: values["prometheus-operator"] === true,
      ...(values["runbook-url"] !== undefined ? { runbookBaseUrl: values["runbook-url"] } : {}),
    },
  };
}

function main(argv: string[]): number {
  const parsed = parseCli(argv);
  if (typeof parsed === "string") {
    process.stderr.write(`${parsed}\n${USAGE}`);
    return 2;
  }
  if ("help" in parsed) {
    process.stdout.write(USAGE);
    return 0;
  }
  let files: ObservabilityFiles;
  try {
    files = observabilityFiles(parsed.options);
  } catch (e) {
    if (e instanceof AlertThresholdError) {
      process.stderr.write(`${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const out = parsed.out === undefined ? GENERATED_DIR : resolve(parsed.out);
  mkdirSync(out, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(out, name), text);
    process.stdout.write(`wrote ${join(out, name)}\n`);
  }
  return 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
