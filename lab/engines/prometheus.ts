/**
 * A real Prometheus (Debian `prometheus`, 2.42) on loopback, for the drill and the tests:
 * it scrapes the given targets (static, with the labels the shipped rules expect: `cluster`,
 * `az`), evaluates the shipped rule files, and says which alerts fired and when — the
 * rules judged against real series instead of promtool's hand-written ones.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, sleep } from "../../agent/src/util/net";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { rulesFileText } from "../../infra/observability/manifests";
import type { AlertThresholds } from "../../infra/observability/thresholds";
import { EngineMissingError, stopChild } from "./child";

export class PrometheusMissingError extends EngineMissingError {
  constructor(bin: string) {
    super(bin, "prometheus");
    this.name = "PrometheusMissingError";
  }
}

export class PrometheusStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PrometheusStartError";
  }
}

export interface PrometheusTarget {
  /** `job` label (the rules read `llm-ha-agent` and `l1-proxy`). */
  job: string;
  /** `host:port` of the `/metrics` endpoint. */
  address: string;
  /** Target labels, e.g. `{cluster, az, node}` as the Kubernetes relabelling would give them. */
  labels?: Record<string, string>;
  /** Keep the target's own labels (the agent's `node`/`az`). Default false. */
  honorLabels?: boolean;
  /** Query parameters, e.g. HAProxy's `{"no-maint": [""]}`. */
  params?: Record<string, string[]>;
  metricsPath?: string;
  /**
   * Prometheus `metric_relabel_configs`, e.g. the drill's per-AZ proxy names onto the
   * production backend name the rules select:
   * `[{ source_labels: ["proxy"], regex: "az_.+_(servers|relayed)", target_label: "proxy", replacement: "inference_$1" }]`.
   */
  metricRelabelConfigs?: Record<string, unknown>[];
}

export interface PrometheusOptions {
  targets: PrometheusTarget[];
  /** Rule files' contents (JSON or YAML). Default: `shippedRules()`. */
  ruleFiles?: string[];
  /** Default `1s`: drill scenarios last seconds to minutes. */
  scrapeInterval?: string;
  /** Default `1s`. */
  evaluationInterval?: string;
  /** Default `prometheus` (or `$LLMHA_PROMETHEUS`). */
  bin?: string;
  /** Default 20000 ms. */
  startTimeoutMs?: number;
}

/** An alert that was firing at some point of a time range. */
export interface FiredAlert {
  alertname: string;
  /** The alert's labels (without `alertname` and `alertstate`). */
  labels: Record<string, string>;
  /** First and last evaluation at which it was firing (ms since the epoch). */
  firstMs: number;
  lastMs: number;
  /** Already firing at the range's start (carried over from before it, e.g. the drill's previous scenario). */
  carried: boolean;
}

export interface PrometheusHandle {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** An instant query; `[labels, value]` per sample. */
  query(expr: string, atMs?: number): Promise<{ labels: Record<string, string>; value: number }[]>;
  /** Alerts firing now (`/api/v1/alerts`). */
  firing(): Promise<{ labels: Record<string, string>; activeAt: string }[]>;
  /** Every alert that fired between the two times (from `ALERTS`, at `stepS` resolution). */
  fired(fromMs: number, toMs: number, stepS?: number): Promise<FiredAlert[]>;
  /** Whether every target has been scraped successfully at least once. */
  targetsUp(): Promise<boolean>;
  /** SIGTERM, then SIGKILL after 3 s; removes the temporary folder. Idempotent. */
  stop(): Promise<void>;
}

/** The rules llm-ha ships, as one file's text (thresholds over the defaults). */
export function shippedRules(overrides: Partial<AlertThresholds> = {}): string {
  return rulesFileText(alertRuleGroups(overrides));
}

function binaryExists(bin: string): boolean {
  const r = spawnSync(bin, ["--version"], { stdio: "ignore", timeout: 10_000 });
  return !r.error && r.status === 0;
}

interface ApiResult<T> {
  status: string;
  data: T;
  error?: string;
}

export async function startPrometheus(opts: PrometheusOptions): Promise<PrometheusHandle> {
  const bin = opts.bin ?? process.env.LLMHA_PROMETHEUS ?? "prometheus";
  if (!binaryExists(bin)) throw new PrometheusMissingError(bin);
  const dir = mkdtempSync(join(tmpdir(), "llmha-prometheus-"));
  const ruleFiles = (opts.ruleFiles ?? [shippedRules()]).map((text, i) => {
    const file = join(dir, `rules-${i}.yml`);
    writeFileSync(file, text);
    return file;
  });
  const config = {
    global: { scrape_interval: opts.scrapeInterval ?? "1s", evaluation_interval: opts.evaluationInterval ?? "1s" },
    rule_files: ruleFiles,
    scrape_configs: opts.targets.map((t, i) => ({
      job_name: `${t.job}-${i}`,
      honor_labels: t.honorLabels ?? false,
      metrics_path: t.metricsPath ?? "/metrics",
      ...(t.params ? { params: t.params } : {}),
      static_configs: [{ targets: [t.address], labels: t.labels ?? {} }],
      // One scrape job per target (its own labels); `job` as the rules expect it.
      relabel_configs: [{ target_label: "job", replacement: t.job }],
      ...(t.metricRelabelConfigs ? { metric_relabel_configs: t.metricRelabelConfigs } : {}),
    })),
  };
  writeFileSync(join(dir, "prometheus.yml"), JSON.stringify(config, null, 2));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let stderr = "";
  const child: ChildProcess = spawn(
    bin,
    [`--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`, "--storage.tsdb.retention.time=1d", "--log.level=warn"],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  child.stderr?.on("data", (d: Buffer) => {
    if (stderr.length < 8000) stderr += d.toString("utf8");
  });
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = performance.now() + (opts.startTimeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new PrometheusStartError(`prometheus exited with code ${child.exitCode}: ${stderr.trim()}`);
    }
    const r = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).catch(() => undefined);
    if (r?.status === 200) break;
    if (performance.now() > deadline) {
      await stop();
      throw new PrometheusStartError(`prometheus on ${url} not ready within ${opts.startTimeoutMs ?? 20_000} ms: ${stderr.trim()}`);
    }
    await sleep(100);
  }

  const client = prometheusApi(url);
  const api = apiAt(url);

  return {
    url,
    ...client,
    async targetsUp() {
      const data = await api<{ activeTargets: { health: string }[] }>("targets", { state: "active" });
      return data.activeTargets.length === opts.targets.length && data.activeTargets.every((t) => t.health === "up");
    },
    stop,
  };
}

/** One call of Prometheus's HTTP API (`/api/v1/<path>`), its `data` or an error naming the path. */
function apiAt(url: string): <T>(path: string, params: Record<string, string>) => Promise<T> {
  return async <T>(path: string, params: Record<string, string>): Promise<T> => {
    const r = await fetch(`${url}/api/v1/${path}?${new URLSearchParams(params).toString()}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await r.json()) as ApiResult<T>;
    if (body.status !== "success") throw new Error(`prometheus ${path}: ${body.error ?? r.status}`);
    return body.data;
  };
}

/** Prometheus's HTTP API at `url` (any Prometheus: the drill's own, or a stack's through its URL): queries and alerts. */
export function prometheusApi(url: string): Pick<PrometheusHandle, "query" | "firing" | "fired"> {
  const api = apiAt(url);

  return {
    async query(expr, atMs) {
      const data = await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>("query", {
        query: expr,
        ...(atMs !== undefined ? { time: String(atMs / 1000) } : {}),
      });
      return data.result.map((s) => ({ labels: s.metric, value: Number(s.value[1]) }));
    },
    async firing() {
      const data = await api<{ alerts: { labels: Record<string, string>; state: string; activeAt: string }[] }>("alerts", {});
      return data.alerts.filter((a) => a.state === "firing").map((a) => ({ labels: a.labels, activeAt: a.activeAt }));
    },
    async fired(fromMs, toMs, stepS = 1) {
      const data = await api<{ result: { metric: Record<string, string>; values: [number, string][] }[] }>("query_range", {
        query: 'ALERTS{alertstate="firing"}',
        start: String(fromMs / 1000),
        // One step past the end: the last evaluation may carry a timestamp a little after the caller's clock.
        end: String(toMs / 1000 + stepS),
        step: String(stepS),
      });
      return data.result
        .filter((s) => s.values.length > 0)
        .map((s) => {
          const { alertname, alertstate: _state, __name__: _name, ...labels } = s.metric;
          const firstMs = s.values[0][0] * 1000;
          return { alertname, labels, firstMs, lastMs: s.values[s.values.length - 1][0] * 1000, carried: firstMs - fromMs < (stepS * 1000) / 2 };
        })
        .sort((a, b) => a.firstMs - b.firstMs || a.alertname.localeCompare(b.alertname));
    },
  };
}
