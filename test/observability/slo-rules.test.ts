/**
 * The SLOs and their multi-window, multi-burn-rate alerts under the real `promtool test
 * rules`: a steady error rate that spends a month's budget in
 * days pages; one failure in ten requests at night does not; streams cut after their 200
 * count; time to first token from vLLM's histogram, or from the probe's where a server
 * exports none; a slow burn opens a ticket and does not page.
 */
import { describe, expect, it } from "vitest";
import { alertRuleGroups } from "../../infra/observability/alerts";
import { havePromtool } from "./promql";
import { at, Cases, runPromtoolTests, s, silent, type Labels, type Series, type TestGroup } from "./promtool-cases";

const HAVE = havePromtool();
const groups = alertRuleGroups();
const cases = new Cases(groups);
const fires = cases.fires.bind(cases);
const FAST = "LlmHaAvailabilityBudgetBurnFast";
const SLOW = "LlmHaAvailabilityBudgetBurnSlow";
const LFAST = "LlmHaLatencyBudgetBurnFast";
const LSLOW = "LlmHaLatencyBudgetBurnSlow";

/** HAProxy's L1 counters for one AZ: `ok` 2xx and `bad` 5xx per second, sampled every `step` seconds for `n` samples. */
function l1(cluster: string, az: string, ok: number, bad: number, step: number, n: number, cut = 0): Series[] {
  const l = { cluster, az, proxy: "inference_servers" };
  const c = (perS: number) => `0+${perS * step}x${n}`;
  return [
    s("haproxy_backend_http_responses_total", { ...l, code: "2xx" }, c(ok)),
    s("haproxy_backend_http_responses_total", { ...l, code: "5xx" }, c(bad)),
    s("haproxy_backend_response_errors_total", l, c(cut)),
  ];
}

/** A latency histogram: `fast` requests per second under 1 s, `slow` over it (bucket bounds written as `le1`). */
function hist(name: string, labels: Labels, le1: string, fast: number, slow: number, step: number, n: number): Series[] {
  const c = (perS: number) => `0+${perS * step}x${n}`;
  return [
    s(`${name}_bucket`, { ...labels, le: "0.5" }, c(fast / 2)),
    s(`${name}_bucket`, { ...labels, le: le1 }, c(fast)),
    s(`${name}_bucket`, { ...labels, le: "+Inf" }, c(fast + slow)),
    s(`${name}_count`, labels, c(fast + slow)),
  ];
}

const FAST_TESTS: TestGroup[] = [
  {
    name: "availability: a steady 3 % of 5xx in one AZ pages (AZ at 14.4×, cluster at 6×); the other AZs and a quiet night do not",
    interval: "15s",
    input_series: [
      // c1: 100 requests/s per AZ, az a fails 3 % (30× the 0.1 % budget), b and c none: the cluster fails 1 % (10×).
      ...l1("c1", "a", 97, 3, 15, 300),
      ...l1("c1", "b", 100, 0, 15, 300),
      ...l1("c1", "c", 100, 0, 15, 300),
      // c2 at night: 10 requests an hour, 1 of them failing (10 %): under the 100-request guard.
      ...l1("c2", "a", 9 / 3600, 1 / 3600, 15, 300),
    ],
    alert_rule_test: [
      at("60m", FAST, fires(FAST, { cluster: "c1" }, "1%"), fires(FAST, { cluster: "c1", az: "a" }, "3%")),
      at("60m", SLOW, fires(SLOW, { cluster: "c1" }, "1%"), fires(SLOW, { cluster: "c1", az: "a" }, "3%")),
      ...silent("60m", LFAST, LSLOW),
    ],
  },
  {
    name: "availability: streams cut after their 200 count as failures",
    interval: "15s",
    input_series: [...l1("c3", "a", 100, 0, 15, 200, 5)],
    alert_rule_test: [at("30m", FAST, fires(FAST, { cluster: "c3" }, "5%"), fires(FAST, { cluster: "c3", az: "a" }, "5%"))],
  },
  {
    name: "latency: time to first token from vLLM where it is exported (le=\"1.0\"), else from the probe (le=\"1\")",
    interval: "15s",
    input_series: [
      // az a: vLLM says 20 % of 100 requests/s take over 1 s (20× the 1 % budget); its probe is fast.
      ...hist("vllm:time_to_first_token_seconds", { cluster: "c4", az: "a", node: "n1", model_name: "m" }, "1.0", 80, 20, 15, 300),
      ...hist("llmha_probe_latency_seconds", { cluster: "c4", az: "a", node: "n1" }, "1", 1, 0, 15, 300),
      // az b: no vLLM series; the probe is fast.
      ...hist("llmha_probe_latency_seconds", { cluster: "c4", az: "b", node: "n2" }, "1", 1, 0, 15, 300),
      // az c: no vLLM series; half the probes take over 1 s.
      ...hist("llmha_probe_latency_seconds", { cluster: "c4", az: "c", node: "n3" }, "1", 0.5, 0.5, 15, 300),
    ],
    alert_rule_test: [
      at(
        "30m",
        LFAST,
        fires(LFAST, { cluster: "c4" }, "20.1%"),
        fires(LFAST, { cluster: "c4", az: "a" }, "20%"),
        fires(LFAST, { cluster: "c4", az: "c" }, "50%"),
      ),
      ...silent("30m", FAST),
    ],
  },
];

/**
 * One L1 proxy target (`job="l1-proxy"`) of an AZ: `up` and its 2xx counter, `ok` requests per
 * second for `n` samples every `step` seconds, each sample given as `[up, requests/s]`; a
 * sample with up 0 is a failed scrape (its counter goes stale, as Prometheus marks it).
 */
function proxy(cluster: string, az: string, step: number, phases: [up: 0 | 1, perS: number, n: number][]): Series[] {
  const l = { cluster, az, job: "l1-proxy", instance: `${az}:8404` };
  const up: string[] = [];
  const total: string[] = [];
  let count = 0;
  let wasUp = true;
  for (const [u, perS, n] of phases) {
    up.push(`${u}x${n - 1}`);
    if (u === 1) {
      total.push(`${count}+${perS * step}x${n - 1}`);
      count += perS * step * (n - 1);
    } else total.push(wasUp ? `stale _x${n - 2}` : `_x${n - 1}`);
    wasUp = u === 1;
  }
  return [
    s("up", l, up.join(" ")),
    s("haproxy_backend_http_responses_total", { ...l, proxy: "inference_servers", code: "2xx" }, total.join(" ")),
    s("haproxy_backend_http_responses_total", { ...l, proxy: "inference_servers", code: "5xx" }, total.map((p) => p.replace(/^[0-9]+\+[0-9.]+x/, "0+0x")).join(" ")),
  ];
}

/** The drill's az-loss: a proxy that is gone counts nothing, yet its clients fail. */
const LOST_TESTS: TestGroup[] = [
  {
    name: "availability: an L1 proxy whose scrape fails while it carries traffic pages within 2 minutes; it counts for l1LostFor (5 m) at most",
    interval: "15s",
    input_series: [
      // c6: two AZs at 100 requests/s each; az a's proxy is gone at 60 m (its clients' connections fail, no series counts them).
      ...proxy("c6", "a", 15, [
        [1, 100, 240],
        [0, 0, 120],
      ]),
      ...proxy("c6", "b", 15, [[1, 100, 360]]),
    ],
    alert_rule_test: [...silent("59m", FAST), at("62m", FAST, fires(FAST, { cluster: "c6" }, "1.865%"), fires(FAST, { cluster: "c6", az: "a" }, "3.727%"))],
    promql_expr_test: [
      // The last rate it measured, counted as failing; nothing lost in az b.
      {
        expr: "cluster_az:llmha_l1_lost_requests:rate",
        eval_time: "61m",
        exp_samples: [
          { labels: 'cluster_az:llmha_l1_lost_requests:rate{az="a", cluster="c6"}', value: 100 },
          { labels: 'cluster_az:llmha_l1_lost_requests:rate{az="b", cluster="c6"}', value: 0 },
        ],
      },
      // After l1LostFor (5 m) Route53 has moved its clients: nothing more is counted (the 6× page holds while its 30 m window does: 5 minutes of half the traffic lost is 6 % of a month's budget).
      {
        expr: "cluster_az:llmha_l1_lost_requests:rate",
        eval_time: "66m",
        exp_samples: [
          { labels: 'cluster_az:llmha_l1_lost_requests:rate{az="a", cluster="c6"}', value: 0 },
          { labels: 'cluster_az:llmha_l1_lost_requests:rate{az="b", cluster="c6"}', value: 0 },
        ],
      },
    ],
  },
  {
    name: "availability: no page when traffic moves away first (a zonal shift, then the proxy goes), nor for the standby AZ at zero whose proxy is down",
    interval: "15s",
    input_series: [
      // c7: az a's traffic moves to az b at 60 m (a shift: a's proxy up, idle); a's proxy is gone at 70 m.
      ...proxy("c7", "a", 15, [
        [1, 100, 240],
        [1, 0, 40],
        [0, 0, 80],
      ]),
      ...proxy("c7", "b", 15, [
        [1, 100, 240],
        [1, 200, 120],
      ]),
      // az c: the standby at zero, its proxy down from 30 m on.
      ...proxy("c7", "c", 15, [
        [1, 0, 120],
        [0, 0, 240],
      ]),
    ],
    alert_rule_test: [...silent("72m", FAST, SLOW), ...silent("80m", FAST, SLOW)],
    promql_expr_test: [
      {
        expr: "cluster_az:llmha_l1_lost_requests:rate",
        eval_time: "71m",
        exp_samples: [
          { labels: 'cluster_az:llmha_l1_lost_requests:rate{az="a", cluster="c7"}', value: 0 },
          { labels: 'cluster_az:llmha_l1_lost_requests:rate{az="b", cluster="c7"}', value: 0 },
          { labels: 'cluster_az:llmha_l1_lost_requests:rate{az="c", cluster="c7"}', value: 0 },
        ],
      },
    ],
  },
];

const SLOW_TESTS: TestGroup[] = [
  {
    name: "availability: 0.4 % failing for hours (4×, a month's budget in a week) opens a ticket and does not page",
    interval: "5m",
    input_series: [...l1("c5", "a", 99.6, 0.4, 300, 50)],
    alert_rule_test: [
      ...silent("1h", FAST),
      at("3h", SLOW, fires(SLOW, { cluster: "c5" }, "0.4%"), fires(SLOW, { cluster: "c5", az: "a" }, "0.4%")),
      ...silent("3h", FAST),
    ],
  },
];

describe.skipIf(!HAVE)("SLO burn-rate alerts under promtool", () => {
  it("fast burns page, slow burns open a ticket, quiet nights and fallbacks as designed", () => {
    const r = runPromtoolTests(groups, FAST_TESTS);
    expect(r.code, r.out).toBe(0);
  });

  it("an L1 proxy that is gone while it carries traffic pages; one that carried none (traffic moved away, the standby at zero) does not", () => {
    const r = runPromtoolTests(groups, LOST_TESTS);
    expect(r.code, r.out).toBe(0);
  });

  it("a slow burn over hours (evaluated every minute)", () => {
    const r = runPromtoolTests(groups, SLOW_TESTS, "1m");
    expect(r.code, r.out).toBe(0);
  });

  it("the burn alerts read every window and guard on traffic", () => {
    const slo = groups.find((g) => g.name === "llm-ha.slo")!;
    for (const r of slo.rules) {
      expect(r.expr).toContain(">= 100"); // sloMinRequests
      if ("alert" in r && r.alert.endsWith("Fast")) expect(r.expr).toMatch(/rate1h > 0\.0144.*rate5m > 0\.0144.*rate6h > 0\.006.*rate30m > 0\.006|rate1h > 0\.144/);
    }
    expect(groups.find((g) => g.name === "llm-ha.slo.recording")!.rules.length).toBe(2 + 7 * 2 * 5);
  });
});
