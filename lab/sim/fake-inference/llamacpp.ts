/**
 * llama.cpp's server as the fake imitates it: `/health` and everything else answering 503
 * "Loading model" while the model loads (the port listens), `/metrics` (the `llamacpp:` series),
 * the OpenAI endpoints, and its native `/completion`.
 */
import { metricsReply, prom, str, wantedTokens, type Engine, type KindApi } from "./kind";
import { chatCompletions, completions, listModels, modelEntry, OPENAI_REPLIES } from "./openai-compat";
import { empty, garbageJson, json, type Reply } from "./wire";

const loading = (): Reply => json(503, { error: { code: 503, message: "Loading model", type: "unavailable_error" } });

export const LLAMACPP: KindApi = {
  closedWhileLoading: false,
  async route(e, method, path, body, res) {
    if (method === "GET" && path === "/metrics") return metrics(e);
    if (method === "GET" && path === "/health") return health(e);
    if (method === "GET" && path === "/v1/models") return listModels(e, (id) => modelEntry(e, id, "llamacpp"));
    if (method === "POST" && path === "/v1/completions") return completions(e, body, res);
    if (method === "POST" && path === "/v1/chat/completions") return chatCompletions(e, body, res);
    if (method === "POST" && path === "/completion") {
      // llama.cpp's native API: {"prompt": "...", "n_predict": n} → {"content": "...", "tokens_predicted": n, ...}.
      return e.infer(res, {
        prompt: str(body.prompt),
        maxTokens: wantedTokens(body.n_predict),
        ok: (text, tokens, prompt) => ({
          content: text,
          id_slot: 0,
          stop: true,
          model: e.servedModel() ?? "",
          tokens_predicted: tokens,
          tokens_evaluated: prompt,
          stop_type: "limit",
        }),
      });
    }
    return e.notFound();
  },
  unavailable: loading,
  modelNotFound: OPENAI_REPLIES.modelNotFound,
  internalError: () => json(500, { error: { code: 500, message: "Internal server error", type: "server_error" } }),
  badRequest: OPENAI_REPLIES.badRequest,
  notFound: () => empty(404),
};

function health(e: Engine): Reply {
  // llama.cpp: 503 with this exact error object while the model loads, then {"status":"ok"}.
  if (e.notReady()) return loading();
  return e.settings.mode === "garbage" ? garbageJson() : json(200, { status: "ok" });
}

function metrics(e: Engine): Reply {
  const s = e.stats();
  const running = s.inFlight - s.waiting;
  return metricsReply(
    prom("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", "", s.promptTokens) +
      prom("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", "", s.generationTokens) +
      prom("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls", "", s.generationTokens) +
      prom("llamacpp:requests_processing", "gauge", "Number of requests processing.", "", running) +
      prom("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", "", s.waiting),
  );
}
