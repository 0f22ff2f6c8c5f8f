/**
 * The rest of a vLLM server's `/metrics`: what a real one exports beside the few series the agent
 * reads — the request histograms of vLLM's V1 loggers, its prefix-cache and preemption counters,
 * its cache-config info series, the Python process and GC series of `prometheus_client`, and the
 * HTTP series of the FastAPI instrumentator. A real answer is about 40–50 KB, almost all of it
 * histogram buckets; the agent reads it every second (five times a second while requests wait),
 * so its parse cost and the overhead figure are measured on a body of that size, not on six lines.
 * Names and bucket bounds follow vLLM 0.8–0.10's `vllm/v1/metrics/loggers.py`.
 */

const LATENCY = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
const PER_TOKEN = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const REQUEST = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0];
const TOKENS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
const ITERATION = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

/** A histogram's lines; `head` false for a further label set of one already described. */
function histogram(name: string, help: string, labels: string, bounds: readonly number[], count: number, sum: number, head = true): string {
  const lead = labels === "" ? "" : `${labels.slice(1, -1)},`;
  let out = head ? `# HELP ${name} ${help}\n# TYPE ${name} histogram\n` : "";
  // Observations spread over the lower half of the buckets: cumulative counts as a real one has.
  bounds.forEach((b, i) => {
    const share = Math.min(1, (i + 1) / Math.max(1, Math.floor(bounds.length / 2)));
    out += `${name}_bucket{${lead}le="${Number.isInteger(b) ? b.toFixed(1) : String(b)}"} ${Math.floor(count * share)}.0\n`;
  });
  out += `${name}_bucket{${lead}le="+Inf"} ${count}.0\n${name}_count${labels} ${count}.0\n${name}_sum${labels} ${sum}\n`;
  return out;
}

function counter(name: string, help: string, labels: string, value: number): string {
  return `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name}${labels} ${value}.0\n`;
}

/** The series a real vLLM exports that the agent does not read, for `served` requests so far. */
export function vllmOtherSeries(labels: string, served: number, tokens: number): string {
  const inner = labels.slice(1, -1);
  const python =
    `# HELP python_gc_objects_collected_total Objects collected during gc\n# TYPE python_gc_objects_collected_total counter\n` +
    [0, 1, 2].map((g) => `python_gc_objects_collected_total{generation="${g}"} ${12_000 + g * 731}.0\n`).join("") +
    `# HELP python_gc_objects_uncollectable_total Uncollectable objects found during GC\n# TYPE python_gc_objects_uncollectable_total counter\n` +
    [0, 1, 2].map((g) => `python_gc_objects_uncollectable_total{generation="${g}"} 0.0\n`).join("") +
    `# HELP python_gc_collections_total Number of times this generation was collected\n# TYPE python_gc_collections_total counter\n` +
    [0, 1, 2].map((g) => `python_gc_collections_total{generation="${g}"} ${900 - g * 300}.0\n`).join("") +
    `# HELP python_info Python platform information\n# TYPE python_info gauge\npython_info{implementation="CPython",major="3",minor="12",patchlevel="9",version="3.12.9"} 1.0\n` +
    [
      ["process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", 1.2e11],
      ["process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", 5.4e9],
      ["process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge", 1.7e9],
      ["process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter", 8123.4],
      ["process_open_fds", "Number of open file descriptors.", "gauge", 212],
      ["process_max_fds", "Maximum number of open file descriptors.", "gauge", 1_048_576],
    ]
      .map(([n, h, t, v]) => `# HELP ${n} ${h}\n# TYPE ${n} ${t}\n${n} ${v}\n`)
      .join("");
  const vllm =
    `# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n` +
    `vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="71051",num_gpu_blocks_override="None",prefix_caching_hash_algo="builtin",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0\n` +
    counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", labels, 0) +
    counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", labels, tokens * 4) +
    counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", labels, tokens) +
    `# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\n` +
    ["stop", "length", "abort"].map((r, i) => `vllm:request_success_total{${inner},finished_reason="${r}"} ${i === 1 ? served : 0}.0\n`).join("") +
    histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels, TOKENS, served, served * 3) +
    histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", labels, TOKENS, served, tokens) +
    histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", labels, ITERATION, served * 2, tokens) +
    histogram("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", labels, TOKENS, served, served * 16) +
    histogram("vllm:request_params_n", "Histogram of the n request parameter.", labels, [1, 2, 5, 10, 20], served, served) +
    histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", labels, TOKENS, served, served * 16) +
    histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels, LATENCY, served, served * 0.02) +
    histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", labels, PER_TOKEN, tokens, tokens * 0.01) +
    ["e2e_request_latency", "request_queue_time", "request_inference_time", "request_prefill_time", "request_decode_time"]
      .map((n) => histogram(`vllm:${n}_seconds`, `Histogram of ${n.replace(/_/g, " ")} in seconds.`, labels, REQUEST, served, served * 0.05))
      .join("");
  const handlers = ["/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"];
  const http =
    `# HELP http_requests_total Total number of requests by method, status and handler.\n# TYPE http_requests_total counter\n` +
    handlers.map((h) => `http_requests_total{handler="${h}",method="${h.startsWith("/v1/c") ? "POST" : "GET"}",status="2xx"} ${served}.0\n`).join("") +
    `# HELP http_request_size_bytes Content length of incoming requests by handler.\n# TYPE http_request_size_bytes summary\n` +
    handlers.map((h) => `http_request_size_bytes_count{handler="${h}"} ${served}.0\nhttp_request_size_bytes_sum{handler="${h}"} ${served * 90}.0\n`).join("") +
    `# HELP http_response_size_bytes Content length of outgoing responses by handler.\n# TYPE http_response_size_bytes summary\n` +
    handlers.map((h) => `http_response_size_bytes_count{handler="${h}"} ${served}.0\nhttp_response_size_bytes_sum{handler="${h}"} ${served * 400}.0\n`).join("") +
    handlers.map((h, i) => histogram("http_request_duration_seconds", "Latency with only few buckets by handler.", `{handler="${h}",method="GET"}`, [0.1, 0.5, 1.0], served, served * 0.01, i === 0)).join("") +
    histogram("http_request_duration_highr_seconds", "Latency with many buckets but no API specific labels.", "", LATENCY, served * 5, served * 0.05);
  return python + vllm + http;
}
