/**
 * A generic OpenAI-compatible server as the fake imitates it: `/v1/models`, completions and chat
 * completions only (no health or metrics endpoint, so probes must use the model list), vLLM's
 * error bodies, an empty 404, and the port staying closed while the model loads.
 */
import type { KindApi } from "./kind";
import { chatCompletions, completions, listModels, modelEntry, OPENAI_REPLIES } from "./openai-compat";
import { empty } from "./wire";

export const OPENAI: KindApi = {
  ...OPENAI_REPLIES,
  closedWhileLoading: true,
  async route(e, method, path, body, res) {
    if (method === "GET" && path === "/v1/models") return listModels(e, (id) => modelEntry(e, id, "system"));
    if (method === "POST" && path === "/v1/completions") return completions(e, body, res);
    if (method === "POST" && path === "/v1/chat/completions") return chatCompletions(e, body, res);
    return e.notFound();
  },
  notFound: () => empty(404),
};
