/**
 * vLLM's OpenAI server as the fake imitates it: `/health`, `/metrics` (the `vllm:` gauges and
 * counters, `vllm:corrupted_requests_total` from the `corruptedRequests` setting, and the rest of
 * a real answer's series: vllm-series.ts), `/v1/models` with vLLM's extra fields (`root`: the
 * `revision` setting where one is set, else the id), completions and chat completions, FastAPI's
 * 404 body, and the port staying closed while the model loads.
 */
import { MAX_MODEL_LEN, metricsReply, prom, type Engine, type KindApi } from "./kind";
import { chatCompletions, completions, listModels, OPENAI_REPLIES } from "./openai-compat";
import { empty, json, type Reply } from "./wire";
import { vllmOtherSeries } from "./vllm-series";

export const VLLM: KindApi = {
  ...OPENAI_REPLIES,
  closedWhileLoading: true,
  async route(e, method, path, body, res) {
    if (method === "GET" && path === "/metrics") return metrics(e);
    if (method === "GET" && path === "/health") return health(e);
    if (method === "GET" && path === "/v1/models") {
      // vLLM: {"object":"list","data":[{id, object:"model", created, owned_by:"vllm", root, parent, max_model_len}]}.
      return listModels(e, (id) => ({ id, object: "model", created: e.created, owned_by: "vllm", root: e.settings.revision ?? id, parent: null, max_model_len: MAX_MODEL_LEN, permission: [] }));
    }
    if (method === "POST" && path === "/v1/completions") return completions(e, body, res);
    if (method === "POST" && path === "/v1/chat/completions") return chatCompletions(e, body, res);
    return e.notFound();
  },
  // FastAPI's 404.
  notFound: () => json(404, { detail: "Not Found" }),
};

function health(e: Engine): Reply {
  // vLLM: 200 with an empty body; 503 when the engine is dead. error5xx also fails it (500).
  if (e.notReady()) return empty(503);
  return empty(e.settings.mode === "error5xx" ? 500 : 200);
}

function metrics(e: Engine): Reply {
  const s = e.stats();
  const running = s.inFlight - s.waiting;
  // vLLM's V1 engine labels every series with its engine index as well (checked against 0.31's loggers).
  const l = `{engine="0",model_name="${e.settings.model}"}`;
  // vLLM ≥ 0.10 names it kv_cache_usage_perc (was gpu_cache_usage_perc); 0..1, grows with the batch.
  const kv = Math.min(1, (running + s.waiting) * 0.02);
  return metricsReply(
    prom("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", l, running) +
      prom("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", l, s.waiting) +
      prom("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", l, kv) +
      prom("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", l, s.promptTokens) +
      prom("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", l, s.generationTokens) +
      // vLLM counts requests whose logits went NaN; versions before it have no such series.
      (e.settings.corruptedRequests === null ? "" : prom("vllm:corrupted_requests_total", "counter", "Corrupted requests, in terms of NaNs in logits.", l, e.settings.corruptedRequests)) +
      // The rest of a real answer (histograms, process and HTTP series): about 40 KB the agent reads past.
      vllmOtherSeries(l, s.served, s.generationTokens),
  );
}
