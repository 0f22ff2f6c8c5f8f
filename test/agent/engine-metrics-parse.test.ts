import { describe, expect, it } from "vitest";
import { parseEngineMetrics, promSum } from "../../agent/src/node/sources/engine-metrics";

/** A vLLM /metrics page the size of a real one: histograms with many buckets around the series the agent reads. */
function vllmPage(): string {
  const l = `{engine="0",model_name="m"}`;
  const out: string[] = [];
  for (let h = 0; h < 12; h++) {
    out.push(`# HELP vllm:h${h}_seconds A histogram.`, `# TYPE vllm:h${h}_seconds histogram`);
    for (let b = 0; b < 40; b++) out.push(`vllm:h${h}_seconds_bucket{engine="0",le="${b / 10}",model_name="m"} ${b * 7}`);
    out.push(`vllm:h${h}_seconds_sum${l} 12.5`, `vllm:h${h}_seconds_count${l} 280`);
  }
  out.push(
    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
    "# TYPE vllm:num_requests_waiting gauge",
    `vllm:num_requests_waiting${l} 3.0`,
    `vllm:num_requests_waiting{engine="1",model_name="m"} 2.0`,
    // A longer name starting with a read one: not the same series.
    `vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 99`,
    `vllm:num_requests_running${l} 7.0`,
    `vllm:kv_cache_usage_perc${l} 0.25`,
    `vllm:prompt_tokens_total${l} 1000.0`,
    `vllm:generation_tokens_total${l} 2345.0`,
    `vllm:generation_tokens_created${l} 1.76e9`,
    `vllm:corrupted_requests_total${l} 1.0`,
  );
  return out.join("\n") + "\n";
}

describe("engine metrics, read in one pass", () => {
  it("reads a real-sized vLLM page: sums engines, ignores longer names, comments and histograms", () => {
    const text = vllmPage();
    expect(text.length).toBeGreaterThan(20_000);
    expect(parseEngineMetrics(text)).toEqual({ family: "vllm", running: 7, waiting: 5, kvCacheUsage: 0.25, tokensTotal: 3345, corruptedRequests: 1 });
    // The same as summing each series over the whole text.
    expect(promSum(text, "vllm:num_requests_waiting")).toBe(5);
  });

  it("keeps label filters (Triton's iteration counter) and CRLF line ends", () => {
    const triton = [
      'nv_inference_pending_request_count{model="m",version="1"} 4',
      'nv_trt_llm_general_metrics{general_type="iteration_counter",model="m"} 41',
      'nv_trt_llm_general_metrics{general_type="timestamp",model="m"} 1700000000',
      'nv_inference_exec_count{model="m",version="1"} 9',
    ].join("\r\n");
    expect(parseEngineMetrics(triton)).toMatchObject({ family: "triton", waiting: 4, running: 0, tokensTotal: 50 });
  });
});
