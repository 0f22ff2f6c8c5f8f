/**
 * The Grafana dashboard llm-ha ships: the fleet at a glance for whoever is on call. Built
 * in code from the agent's and HAProxy's real series (a test scrapes both and checks every
 * name), rows top to bottom from "is anything wrong" to per-GPU detail.
 */
import { DS, dashboardRows, type PanelSpec } from "./panels";
import { DEFAULT_ALERT_THRESHOLDS, type AlertThresholds } from "./thresholds";

export interface DashboardTarget {
  refId: string;
  expr: string;
  legendFormat: string;
  datasource: { type: "prometheus"; uid: string };
  instant?: boolean;
  format?: "time_series" | "table";
}

export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  description?: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: "prometheus"; uid: string };
  targets?: DashboardTarget[];
  fieldConfig?: Record<string, unknown>;
  options?: Record<string, unknown>;
  collapsed?: boolean;
  panels?: DashboardPanel[];
}

/** The dashboard model Grafana imports (`schemaVersion` 39, Grafana 10/11). */
export interface Dashboard {
  uid: string;
  title: string;
  description: string;
  tags: string[];
  timezone: string;
  schemaVersion: number;
  version: number;
  editable: boolean;
  refresh: string;
  time: { from: string; to: string };
  templating: { list: Record<string, unknown>[] };
  annotations: { list: Record<string, unknown>[] };
  panels: DashboardPanel[];
}

export const DASHBOARD_UID = "llm-ha-fleet";

function thresholds(p: PanelSpec): Record<string, unknown> {
  const green = { color: "green", value: null };
  if (p.redAbove !== undefined) return { mode: "absolute", steps: [green, { color: "red", value: p.redAbove }] };
  if (p.redBelow !== undefined) return { mode: "absolute", steps: [{ color: "red", value: null }, { color: "green", value: p.redBelow }] };
  return { mode: "absolute", steps: [green] };
}

function panel(p: PanelSpec, id: number, x: number, y: number): DashboardPanel {
  const defaults: Record<string, unknown> = { thresholds: thresholds(p) };
  if (p.unit) defaults.unit = p.unit;
  if (p.decimals !== undefined) defaults.decimals = p.decimals;
  if (p.min !== undefined) defaults.min = p.min;
  if (p.max !== undefined) defaults.max = p.max;
  if (p.mappings) {
    defaults.mappings = [
      { type: "value", options: Object.fromEntries(p.mappings.map((mp, i) => [String(mp.value), { text: mp.text, color: mp.color, index: i }])) },
    ];
  }
  if (p.type === "timeseries" && (p.redAbove !== undefined || p.redBelow !== undefined)) {
    defaults.custom = { thresholdsStyle: { mode: "dashed" } };
  }
  const options: Record<string, unknown> =
    p.type === "stat"
      ? { reduceOptions: { calcs: ["lastNotNull"], fields: "", values: false }, colorMode: "background", textMode: "auto", graphMode: "none" }
      : p.type === "timeseries"
        ? { legend: { displayMode: "table", placement: "right", calcs: ["lastNotNull", "max"] }, tooltip: { mode: "multi", sort: "desc" } }
        : p.type === "state-timeline"
          ? { showValue: "auto", mergeValues: true, rowHeight: 0.9 }
          : p.type === "bargauge"
            ? { orientation: "horizontal", displayMode: "gradient", reduceOptions: { calcs: ["lastNotNull"], fields: "", values: false } }
            : { showHeader: true };
  return {
    id,
    type: p.type,
    title: p.title,
    description: p.description,
    gridPos: { x, y, w: p.w, h: p.h ?? 8 },
    datasource: DS,
    targets: p.queries.map((q, i) => ({
      refId: String.fromCharCode(65 + i),
      expr: q.expr,
      legendFormat: q.legend ?? "",
      datasource: DS,
      ...(q.instant || q.table ? { instant: true } : {}),
      ...(q.table ? { format: "table" as const } : {}),
    })),
    fieldConfig: { defaults, overrides: [] },
    options,
  };
}

function variable(name: string, label: string, query: string): Record<string, unknown> {
  return {
    name,
    label,
    type: "query",
    datasource: DS,
    query: { query, refId: `${name}-var` },
    definition: query,
    refresh: 2,
    includeAll: true,
    multi: true,
    allValue: ".*",
    current: { selected: true, text: ["All"], value: ["$__all"] },
    sort: 1,
  };
}

/** The dashboard, thresholds as the alerts use them. */
export function buildDashboard(overrides: Partial<AlertThresholds> = {}): Dashboard {
  const t: AlertThresholds = { ...DEFAULT_ALERT_THRESHOLDS, ...overrides };
  const panels: DashboardPanel[] = [];
  let id = 1;
  let y = 0;
  for (const row of dashboardRows(t)) {
    panels.push({ id: id++, type: "row", title: row.title, gridPos: { x: 0, y, w: 24, h: 1 }, collapsed: false, panels: [] });
    y += 1;
    let x = 0;
    let rowH = 0;
    for (const p of row.panels) {
      if (x + p.w > 24) {
        y += rowH;
        x = 0;
        rowH = 0;
      }
      panels.push(panel(p, id++, x, y));
      x += p.w;
      rowH = Math.max(rowH, p.h ?? 8);
    }
    y += rowH;
  }
  return {
    uid: DASHBOARD_UID,
    title: "llm-ha fleet",
    description: "Nodes, AZs, tiers, leader, probes, GPUs and the L1 proxy of llm-ha (docs/observability.md)",
    tags: ["llm-ha", "gpu", "inference"],
    timezone: "browser",
    schemaVersion: 39,
    version: 1,
    editable: true,
    refresh: "30s",
    time: { from: "now-6h", to: "now" },
    templating: {
      list: [
        { name: "datasource", label: "Data source", type: "datasource", query: "prometheus", current: {}, hide: 0 },
        variable("cluster", "Cluster", "label_values(llmha_node_status, cluster)"),
        variable("az", "AZ", 'label_values(llmha_node_status{cluster=~"$cluster"}, az)'),
      ],
    },
    annotations: {
      list: [
        {
          name: "llm-ha alerts",
          datasource: DS,
          enable: true,
          iconColor: "red",
          expr: 'ALERTS{alertname=~"LlmHa.*", alertstate="firing", cluster=~"$cluster", severity="critical"}',
          titleFormat: "{{alertname}}",
          step: "60s",
        },
      ],
    },
    panels,
  };
}

/** Every PromQL expression of the dashboard (panel queries, variables, annotations). */
export function dashboardExprs(d: Dashboard): string[] {
  const fromPanels = (ps: DashboardPanel[]): string[] => ps.flatMap((p) => [...(p.targets ?? []).map((t) => t.expr), ...fromPanels(p.panels ?? [])]);
  // `label_values(<selector>, <label>)`: the selector is the PromQL part.
  const vars = d.templating.list.flatMap((v) => {
    const sel = typeof v.definition === "string" ? /^label_values\((.+),\s*\w+\)$/.exec(v.definition)?.[1] : undefined;
    return sel ? [sel] : [];
  });
  const notes = d.annotations.list.flatMap((a) => (typeof a.expr === "string" ? [a.expr] : []));
  return [...fromPanels(d.panels), ...vars, ...notes];
}
