/**
 * NVIDIA Triton as the fake imitates it: `/v2/health/live` and `/v2/health/ready`, the per-model
 * ready, metadata and generate endpoints under `/v2/models/`, its 400s for unknown or unready
 * models, and the port listening (live, not ready) while the model loads.
 */
import { isSeededGreedy } from "./greedy";
import type { ServerResponse } from "node:http";
import { metricsReply, str, wantedTokens, type Body, type Engine, type KindApi } from "./kind";
import { chatCompletions, completions, listModels, modelEntry } from "./openai-compat";
import { empty, garbageJson, json, type Reply } from "./wire";

export const TRITON: KindApi = {
  closedWhileLoading: false,
  async route(e, method, path, body, res) {
    // Triton: live as soon as the HTTP endpoint is up, even while models load.
    if (method === "GET" && path === "/v2/health/live") return empty(200);
    // Triton: 200 when the server and its models are ready, 400 (empty body) otherwise.
    if (method === "GET" && path === "/v2/health/ready") return empty(e.notReady() ? 400 : 200);
    if (path.startsWith("/v2/models/")) return model(e, method, path, body, res);
    if (method === "POST" && path === "/v2/repository/index") return repositoryIndex(e);
    // Triton's OpenAI-compatible frontend (its own port, 9000, in a real deployment; here on the
    // same one): what a proxy carrying OpenAI traffic sends to a Triton fleet.
    if (method === "GET" && path === "/v1/models") return listModels(e, (id) => modelEntry(e, id, "Triton Inference Server"));
    if (method === "POST" && path === "/v1/completions") return completions(e, body, res);
    if (method === "POST" && path === "/v1/chat/completions") return chatCompletions(e, body, res);
    // Triton serves its metrics on a port of its own (8002); the fake serves them here too.
    if (method === "GET" && path === "/metrics") return metrics(e);
    return e.notFound();
  },
  unavailable: (e) => json(400, { error: `Request for unknown model: '${e.settings.model}' is not ready` }),
  modelNotFound: (model) => json(400, { error: `Request for unknown model: '${model}' is not found` }),
  internalError: () => json(500, { error: "in ensemble 'ensemble', Encountered error for requestId 1: CUDA error" }),
  badRequest: (message) => json(400, { error: message }),
  notFound: () => empty(404),
};

/** Triton's per-model endpoints: ready, metadata, generate. Unknown or unready models answer 400. */
async function model(e: Engine, method: string, path: string, body: Body, res: ServerResponse): Promise<Reply | undefined> {
  const m = /^\/v2\/models\/([^/]+)(?:\/versions\/[^/]+)?(\/ready|\/generate)?$/.exec(path);
  if (!m) return e.notFound();
  const name = decodeURIComponent(m[1]);
  const known = name === e.servedModel();
  if (method === "GET" && m[2] === "/ready") return empty(known && !e.notReady() ? 200 : 400);
  if (e.notReady()) return e.unavailable();
  if (method === "GET" && m[2] === undefined) {
    if (!known) return e.modelNotFound(name);
    if (e.settings.mode === "garbage") return garbageJson();
    return json(200, {
      name,
      versions: ["1"],
      platform: "ensemble",
      inputs: [
        { name: "text_input", datatype: "BYTES", shape: [-1] },
        { name: "max_tokens", datatype: "INT32", shape: [-1] },
      ],
      outputs: [{ name: "text_output", datatype: "BYTES", shape: [-1] }],
    });
  }
  if (method === "POST" && m[2] === "/generate") {
    // Triton generate extension: {"text_input": "...", "max_tokens": n} → {"model_name", "model_version", "text_output"}.
    return e.infer(res, {
      model: name,
      prompt: str(body.text_input),
      maxTokens: wantedTokens(body.max_tokens),
      // Text only: Triton's generate returns no token ids or logprobs.
      seeded: isSeededGreedy(body.temperature, body.seed),
      ok: (text) => ({ model_name: name, model_version: "1", text_output: text }),
    });
  }
  return e.notFound();
}

/** Triton's model repository index: each model's state, and the load error of one that failed. */
function repositoryIndex(e: Engine): Reply {
  const name = e.settings.model;
  if (e.loadFailed()) {
    return json(200, [{ name, version: "1", state: "UNAVAILABLE", reason: "failed to load 'model': [TensorRT-LLM][ERROR] Assertion failed: engine deserialization failed (corrupted file)" }]);
  }
  return json(200, [{ name, version: "1", state: e.notReady() ? "LOADING" : "READY" }]);
}

/** Triton's Prometheus metrics: pending requests, executions, and TensorRT-LLM's iteration counter. */
function metrics(e: Engine): Reply {
  const s = e.stats();
  const l = `{model="${e.settings.model}",version="1"}`;
  return metricsReply(
    `# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.\n# TYPE nv_inference_pending_request_count gauge\nnv_inference_pending_request_count${l} ${s.waiting}\n` +
      `# HELP nv_inference_exec_count Number of model executions performed (does not include cached requests)\n# TYPE nv_inference_exec_count counter\nnv_inference_exec_count${l} ${s.served}\n` +
      `# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n# TYPE nv_inference_request_success counter\nnv_inference_request_success${l} ${s.served}\n` +
      `# HELP nv_trt_llm_general_metrics General TRT LLM metrics\n# TYPE nv_trt_llm_general_metrics gauge\nnv_trt_llm_general_metrics{general_type="iteration_counter",model="tensorrt_llm",version="1"} ${s.generationTokens}\n`,
  );
}
