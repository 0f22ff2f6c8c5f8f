/**
 * The OpenAI-compatible surface several kinds share: the model list, completions and chat
 * completions with their success bodies and their streamed chunks (`"stream": true`), and the
 * OpenAI error object with the error replies of vLLM's OpenAI server, which generic
 * OpenAI-compatible servers copy. Every kind builds its OpenAI routes from these (Triton's are
 * its OpenAI-compatible frontend).
 */
import type { ServerResponse } from "node:http";
import { openaiLogprobs, isSeededGreedy } from "./greedy";
import { str, wantedTokens, type Body, type Engine, type StreamFormat } from "./kind";
import type { InferenceKind } from "./settings";
import { KIND_CONTINUATION } from "../../../contracts/continuation";
import { garbageJson, json, type Reply } from "./wire";

/** `{"error": {message, type, param, code}}`, the shape the OpenAI API and vLLM answer errors with. */
export function openaiError(code: number, message: string, type: string, param: string | null = null): Reply {
  return json(code, { error: { message, type, param, code } });
}

/** vLLM's error replies, which generic OpenAI-compatible servers copy (llama.cpp takes some of them). */
export const OPENAI_REPLIES = {
  unavailable: (): Reply => openaiError(503, "Service Unavailable", "ServiceUnavailableError"),
  // 404 with an OpenAI error object naming the `model` parameter.
  modelNotFound: (model: string): Reply => openaiError(404, `The model \`${model}\` does not exist.`, "NotFoundError", "model"),
  internalError: (): Reply => openaiError(500, "EngineCore encountered an issue.", "InternalServerError"),
  badRequest: (message: string): Reply => openaiError(400, message, "BadRequestError"),
};

/** `GET /v1/models`: `{"object":"list","data":[entry]}`, with an empty list once the model is unloaded. */
export function listModels(e: Engine, entry: (id: string) => unknown): Reply {
  if (e.notReady()) return e.unavailable();
  if (e.settings.mode === "garbage") return garbageJson();
  const id = e.servedModel();
  return json(200, { object: "list", data: id ? [entry(id)] : [] });
}

/** A model-list entry as servers other than vLLM write it. */
export function modelEntry(e: Engine, id: string, owner: string): unknown {
  return { id, object: "model", created: e.created, owned_by: owner };
}

/** `POST /v1/completions`, answered whole or, with `"stream": true`, as `text_completion` chunks. */
export function completions(e: Engine, body: Body, res: ServerResponse): Promise<Reply | undefined> {
  return e.infer(res, {
    model: str(body.model) || undefined,
    prompt: str(body.prompt),
    maxTokens: wantedTokens(body.max_tokens),
    seeded: isSeededGreedy(body.temperature, body.seed),
    // `logprobs: N` asks for them (vLLM returns token ids too with `return_tokens_as_token_ids`; the fake always does).
    ok: (text, tokens, prompt, greedy) =>
      openaiBody(e, "text_completion", { index: 0, text, logprobs: greedy && typeof body.logprobs === "number" ? openaiLogprobs(greedy) : null, finish_reason: "length", stop_reason: null }, tokens, prompt),
    stream: body.stream === true ? completionStream(e, body) : undefined,
  });
}

/**
 * `POST /v1/chat/completions`: the prompt is every message's content, one a line, then a new
 * assistant turn; streamed as `chat.completion.chunk`s when asked. A kind that continues a final
 * assistant message (contracts/continuation.ts) leaves it open when asked, as its chat template
 * does; otherwise that message is a closed turn and a new one starts.
 */
export async function chatCompletions(e: Engine, body: Body, res: ServerResponse): Promise<Reply | undefined> {
  const prompt = chatPrompt(e.kind, body, e.settings.continuation === "refuse");
  if (typeof prompt !== "string") return prompt;
  return e.infer(res, {
    model: str(body.model) || undefined,
    prompt,
    maxTokens: wantedTokens(body.max_completion_tokens ?? body.max_tokens),
    seeded: isSeededGreedy(body.temperature, body.seed),
    ok: (text, tokens, prompt) =>
      openaiBody(e, "chat.completion", { index: 0, message: { role: "assistant", content: text }, logprobs: null, finish_reason: "length" }, tokens, prompt),
    stream: body.stream === true ? chatStream(e, body) : undefined,
  });
}

/**
 * The context a chat request renders to, or the 400 its kind answers a bad continuation with.
 * `refuse`: the engine does not take the continuation fields at all (`continuation: refuse`):
 * a request carrying `continue_final_message` is a 400, as from an engine without the parameter.
 */
export function chatPrompt(kind: InferenceKind, body: Body, refuse = false): string | Reply {
  if (refuse && body.continue_final_message === true) {
    return OPENAI_REPLIES.badRequest("1 validation error for ChatCompletionRequest\ncontinue_final_message\n  Extra inputs are not permitted [type=extra_forbidden]");
  }
  const msgs = Array.isArray(body.messages) ? (body.messages as unknown[]).map((m) => (typeof m === "object" && m !== null ? (m as Body) : {})) : [];
  const text = msgs.map((m) => str(m.content)).join("\n");
  const lastIsAssistant = msgs.at(-1)?.role === "assistant";
  const k = KIND_CONTINUATION[kind];
  // llama-server prefills a trailing assistant message unless told otherwise.
  const open = k.chat === "continue" && (body.continue_final_message === true || (kind === "llamacpp" && lastIsAssistant && body.continue_final_message !== false));
  if (open) {
    // vLLM's add_generation_prompt defaults to true, and vLLM refuses both.
    const genPrompt = body.add_generation_prompt ?? (kind === "vllm" ? true : false);
    if (genPrompt === true) return OPENAI_REPLIES.badRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    if (!lastIsAssistant) return OPENAI_REPLIES.badRequest("continue_final_message needs a final assistant message");
    return text;
  }
  return text + (lastIsAssistant ? "</s>" : "") + "\n";
}

const newId = (prefix: string): string => `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;
const usage = (tokens: number, prompt: number): unknown => ({ prompt_tokens: prompt, total_tokens: prompt + tokens, completion_tokens: tokens });
/** `stream_options: {"include_usage": true}`: a last chunk with empty choices and the usage. */
const wantsUsage = (body: Body): boolean => (body.stream_options as Body | undefined)?.include_usage === true;

/** vLLM's completion chunks: one `text_completion` object a token, the last with `finish_reason`. */
function completionStream(e: Engine, body: Body): StreamFormat {
  const head = { id: newId("cmpl"), object: "text_completion", created: Math.floor(Date.now() / 1000), model: e.servedModel() ?? "" };
  const chunk = (text: string, finish: string | null): unknown => ({ ...head, choices: [{ index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null }] });
  return {
    opening: () => [],
    token: (text) => chunk(text, null),
    closing: (tokens, prompt) => [chunk("", "length"), ...(wantsUsage(body) ? [{ ...head, choices: [], usage: usage(tokens, prompt) }] : [])],
  };
}

/** OpenAI's chat chunks: the assistant role first, then one `delta.content` a token, then `finish_reason`. */
function chatStream(e: Engine, body: Body): StreamFormat {
  const head = { id: newId("chatcmpl"), object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: e.servedModel() ?? "" };
  const chunk = (delta: unknown, finish: string | null): unknown => ({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  return {
    opening: () => [chunk({ role: "assistant", content: "" }, null)],
    token: (text) => chunk({ content: text }, null),
    closing: (tokens, prompt) => [chunk({}, "length"), ...(wantsUsage(body) ? [{ ...head, choices: [], usage: usage(tokens, prompt) }] : [])],
  };
}

function openaiBody(e: Engine, object: string, choice: unknown, tokens: number, prompt: number): unknown {
  const prefix = object === "chat.completion" ? "chatcmpl" : "cmpl";
  return {
    id: newId(prefix),
    object,
    created: Math.floor(Date.now() / 1000),
    model: e.servedModel() ?? "",
    choices: [choice],
    usage: usage(tokens, prompt),
  };
}
