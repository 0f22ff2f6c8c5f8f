/**
 * Hugging Face TGI as the fake imitates it: `/health`, `/info`, `/metrics` (the `tgi_` series),
 * its native `/generate` and the OpenAI chat and completions endpoints, its `{error, error_type}` error bodies, and
 * the port staying closed while the model loads.
 */
import { MAX_MODEL_LEN, metricsReply, str, wantedTokens, type Body, type Engine, type KindApi } from "./kind";
import { chatCompletions, completions } from "./openai-compat";
import { empty, garbageJson, json, type Reply } from "./wire";

const unhealthy = (): Reply => json(503, { error: "unhealthy", error_type: "healthcheck" });

export const TGI: KindApi = {
  closedWhileLoading: true,
  async route(e, method, path, body, res) {
    if (method === "GET" && path === "/metrics") return metrics(e);
    // TGI: 200 with an empty body when a tiny generation succeeds, 503 with its error object otherwise.
    if (method === "GET" && path === "/health") return e.notReady() ? unhealthy() : empty(200);
    if (method === "GET" && path === "/info") return info(e);
    if (method === "POST" && path === "/v1/chat/completions") return chatCompletions(e, body, res);
    // TGI ≥ 2.0.2 also serves the OpenAI completions route (the router's `completions` handler).
    if (method === "POST" && path === "/v1/completions") return completions(e, body, res);
    if (method === "POST" && path === "/generate") {
      // TGI's native API: {"inputs": "...", "parameters": {"max_new_tokens": n}} → {"generated_text": "..."}.
      return e.infer(res, {
        prompt: str(body.inputs),
        maxTokens: wantedTokens((body.parameters as Body | undefined)?.max_new_tokens),
        ok: (text) => ({ generated_text: text }),
      });
    }
    return e.notFound();
  },
  unavailable: unhealthy,
  // TGI serves one model and has no unload; this mirrors its {error, error_type} error body.
  modelNotFound: (model) => json(404, { error: `Model ${model} is not loaded`, error_type: "not_found" }),
  internalError: () => json(500, { error: "Request failed during generation: CUDA error: an illegal memory access was encountered", error_type: "generation" }),
  badRequest: (message) => json(400, { error: message }),
  notFound: () => empty(404),
};

function info(e: Engine): Reply {
  if (e.notReady()) return e.unavailable();
  if (e.settings.mode === "garbage") return garbageJson();
  // TGI 2.x GET /info, with the fields a router reports.
  return json(200, {
    model_id: e.servedModel() ?? "",
    // The weights' commit, where the `revision` setting gives one.
    model_sha: e.settings.revision,
    model_dtype: "torch.float16",
    model_device_type: "cuda",
    model_pipeline_tag: "text-generation",
    max_concurrent_requests: 128,
    max_best_of: 2,
    max_stop_sequences: 4,
    max_input_tokens: MAX_MODEL_LEN - 1,
    max_total_tokens: MAX_MODEL_LEN,
    validation_workers: 2,
    max_client_batch_size: 4,
    router: "text-generation-router",
    version: "2.4.1",
    sha: null,
    docker_label: null,
  });
}

function metrics(e: Engine): Reply {
  const s = e.stats();
  const running = s.inFlight - s.waiting;
  return metricsReply(
    `# TYPE tgi_queue_size gauge\ntgi_queue_size ${s.waiting}\n` +
      `# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size ${running}\n` +
      // One forward pass per generated token (decode) in the fake; counts while a request still generates.
      `# TYPE tgi_batch_inference_count counter\ntgi_batch_inference_count{method="prefill"} ${s.served + s.inFlight - s.waiting}\ntgi_batch_inference_count{method="decode"} ${s.generationTokens}\n` +
      `# TYPE tgi_request_generated_tokens_sum counter\ntgi_request_generated_tokens_sum ${s.generationTokens}\n`,
  );
}
