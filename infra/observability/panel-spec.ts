/**
 * The panel and row shapes of the dashboard and the query helpers every row module shares:
 * each series filtered by the \`$cluster\` and \`$az\` variables, leader-only series read from
 * the agent that leads now.
 */
import { fromLeader } from "./alerts";
import { L1_BACKENDS_MATCHER } from "../../contracts/names";

/** The data source variable every panel and query uses. */
export const DS = { type: "prometheus" as const, uid: "${datasource}" };

export interface PanelSpec {
  type: "stat" | "timeseries" | "state-timeline" | "table" | "bargauge";
  title: string;
  description: string;
  /** Width in Grafana's 24-column grid. */
  w: number;
  h?: number;
  queries: { expr: string; legend?: string; instant?: boolean; table?: boolean }[];
  unit?: string;
  /** Decimals shown (e.g. 0 for a counter such as the fencing token). */
  decimals?: number;
  /** The shipped alerts this panel shows the series of (a test checks every alert has one). */
  alerts?: string[];
  min?: number;
  max?: number;
  /** Value → text (and colour) mappings, e.g. tier levels or AZ states. */
  mappings?: { value: number; text: string; color: string }[];
  /** Red above this value. */
  redAbove?: number;
  /** Red below this value. */
  redBelow?: number;
}

export interface RowSpec {
  title: string;
  panels: PanelSpec[];
}

/** `name{cluster=~"$cluster", az=~"$az", …}`: every panel follows the two variables. */
export function m(name: string, extra = ""): string {
  return `${name}{cluster=~"$cluster", az=~"$az"${extra ? `, ${extra}` : ""}}`;
}

/** `name{cluster=~"$cluster"}`: fleet-wide series, whose `az` is only the reporting agent's. */
export function mc(name: string): string {
  return `${name}{cluster=~"$cluster"}`;
}

/** A series as the current leader publishes it: per AZ (filtered by `$az`), or fleet-wide. */
export const leader = (name: string, extra = "") => fromLeader(m(name, extra), mc("llmha_leader"));
export const leaderFleet = (name: string) => fromLeader(mc(name), mc("llmha_leader"));

/** A quantile of a histogram's rate, by the given labels. */
export function hq(q: number, by: string, histogram: string, sel: (name: string) => string = m): string {
  return `histogram_quantile(${q}, sum by (${by}, le) (rate(${sel(`${histogram}_bucket`)}[$__rate_interval])))`;
}

/** The L1 proxies' responses (of one status class when given). */
export function l1(code?: string): string {
  return m("haproxy_backend_http_responses_total", `${L1_BACKENDS_MATCHER}${code ? `, code="${code}"` : ""}`);
}
