/**
 * Stand-in for an inference server (vLLM, TGI, Triton, llama.cpp, generic OpenAI) on machines without GPUs.
 * It answers each kind's readiness, model, completion and metrics endpoints with the real shapes and status
 * codes, and switches between fault modes at run time through an admin API on a separate port, so that a
 * fault never depends on the inference port answering. Requests have real shapes: prompts of hundreds of
 * KB, generation time that grows with `max_tokens`, OpenAI streams (`"stream": true`), and a query of
 * death (a prompt carrying `QUERY_OF_DEATH_MARKER` kills the process).
 *
 * This file is the public entry and the script simulated nodes spawn; the parts live in `fake-inference/`:
 * `settings.ts` (modes, settings, errors), `server.ts` (lifecycle and fault modes), `admin.ts` (admin API),
 * one file per kind (`vllm.ts`, `tgi.ts`, `triton.ts`, `llamacpp.ts`, `openai.ts`, with `openai-compat.ts`
 * for the endpoints they share), `kind.ts` (what a kind provides), `stream.ts` (server-sent events), `wire.ts`
 * (HTTP) and `cli.ts` (the process).
 */
import { runFakeInferenceCli } from "./fake-inference/cli";

export {
  CONTINUATIONS,
  FAKE_INFERENCE_MODES,
  FAKE_SERVER_HEADER,
  FakeInferenceAdminError,
  FakeInferenceSettingsError,
  INFERENCE_KINDS,
  parseSettingsChange,
  QUERY_OF_DEATH_EXIT_CODE,
  QUERY_OF_DEATH_MARKER,
  WRONG_MODEL_ID,
  type FakeInference,
  type FakeInferenceMode,
  type FakeInferenceOptions,
  type FakeInferenceProfile,
  type FakeInferenceSettings,
  type FakeInferenceState,
  type FakeInferenceStats,
  type InferenceKind,
} from "./fake-inference/settings";
export { startFakeInference } from "./fake-inference/server";
export { fakeInferenceStats, setFakeInferenceMode } from "./fake-inference/admin";
export { fakeInferenceFlags, parseFakeInferenceArgs } from "./fake-inference/cli";

if (require.main === module) void runFakeInferenceCli(process.argv.slice(2));
