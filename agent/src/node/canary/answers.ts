/**
 * Correctness canaries: the known-answer requests an agent sends its own server, how
 * each kind is asked (greedy: temperature 0, a fixed seed, a short output) and what comes back —
 * the text, and the tokens and logprobs where the kind returns them — and how two answers are
 * compared within the nondeterminism real servers have (batch-dependent kernels: a prefix of
 * tokens, logprobs within a bound). Pure but for the request shapes; no I/O here.
 */
import type { InferenceKind } from "../../config/spec";

/** The two sets: the first runs every round, the second re-checks a node whose first set differed. */
export const CANARY_SETS = ["first", "second"] as const;
export type CanarySet = (typeof CANARY_SETS)[number];

export interface CanaryPrompt {
  id: string;
  prompt: string;
}

/**
 * Prompts whose greedy continuation depends on arithmetic and facts, so that broken weights or a
 * bad kernel change the first tokens: short, fixed, never edited (an edit is a new id).
 */
export const CANARY_PROMPTS: Readonly<Record<CanarySet, readonly CanaryPrompt[]>> = {
  first: [
    { id: "a1", prompt: "Q: What is 17 times 23? A:" },
    { id: "a2", prompt: "The capital of Australia is" },
    { id: "a3", prompt: "def fibonacci(n):\n    " },
  ],
  second: [
    { id: "b1", prompt: "Water boils at sea level at a temperature of" },
    { id: "b2", prompt: "Translate to French: 'good morning' ->" },
    { id: "b3", prompt: "1, 1, 2, 3, 5, 8, 13," },
  ],
};

/** The seed every canary request carries (servers that honour it sample the same way). */
export const CANARY_SEED = 4242;

/** One answer: its text, and per token the text and logprob where the server returned them. */
export interface CanaryAnswer {
  text: string;
  tokens: string[] | null;
  logprobs: number[] | null;
}

export interface CanaryTolerance {
  /** Tokens (or words, for kinds that return text only) compared from the start of the answer. */
  prefixTokens: number;
  /** Largest difference allowed between two logprobs of the compared prefix. */
  logprobDelta: number;
}

export interface CanaryRequest {
  url: string;
  body: unknown;
  /** The answer, or null when the reply is not a completion. */
  parse(text: string): CanaryAnswer | null;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * JSON as Python servers write it: `NaN`, `Infinity` and `-Infinity` bare (json.dumps' default).
 * They become NaN here, so a NaN logprob is seen rather than the whole reply being unreadable.
 */
export function parsePythonJson(text: string): unknown {
  const marked = text.replace(/([:,[]\s*)(-?Infinity|NaN)(?=\s*[,\]}])/g, '$1"__llmha_nonfinite__"');
  try {
    return JSON.parse(marked, (_k, v: unknown) => (v === "__llmha_nonfinite__" ? Number.NaN : v));
  } catch {
    return undefined;
  }
}

const numbers = (v: unknown): number[] | null => (Array.isArray(v) ? v.map((x) => (typeof x === "number" ? x : Number.NaN)) : null);
const strings = (v: unknown): string[] | null => (Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : null);

/** The canary request for a server kind: OpenAI completions with logprobs, TGI's generate with details, Triton's generate (text only). */
export function canaryRequest(kind: InferenceKind, base: string, model: string | null, p: CanaryPrompt, maxTokens: number): CanaryRequest | null {
  if (kind === "tgi") {
    return {
      url: `${base}/generate`,
      body: { inputs: p.prompt, parameters: { max_new_tokens: maxTokens, do_sample: false, seed: CANARY_SEED, details: true } },
      parse(text) {
        const b = parsePythonJson(text);
        if (!isRecord(b) || typeof b.generated_text !== "string") return null;
        const toks = isRecord(b.details) && Array.isArray(b.details.tokens) ? b.details.tokens.filter(isRecord) : null;
        return { text: b.generated_text, tokens: toks ? toks.map((t) => String(t.text ?? "")) : null, logprobs: toks ? numbers(toks.map((t) => t.logprob)) : null };
      },
    };
  }
  if (!model) return null;
  if (kind === "triton") {
    return {
      url: `${base}/v2/models/${encodeURIComponent(model)}/generate`,
      body: { text_input: p.prompt, max_tokens: maxTokens, temperature: 0, seed: CANARY_SEED },
      parse(text) {
        const b = parsePythonJson(text);
        return isRecord(b) && typeof b.text_output === "string" ? { text: b.text_output, tokens: null, logprobs: null } : null;
      },
    };
  }
  return {
    url: `${base}/v1/completions`,
    body: { model, prompt: p.prompt, max_tokens: maxTokens, temperature: 0, seed: CANARY_SEED, logprobs: 1, stream: false },
    parse(text) {
      const b = parsePythonJson(text);
      if (!isRecord(b) || !Array.isArray(b.choices) || !isRecord(b.choices[0]) || typeof b.choices[0].text !== "string") return null;
      const c = b.choices[0];
      const lp = isRecord(c.logprobs) ? c.logprobs : null;
      return { text: c.text as string, tokens: lp ? strings(lp.tokens) : null, logprobs: lp ? numbers(lp.token_logprobs) : null };
    },
  };
}

/** The tokens compared: the server's own where it returned them, else the words of the text (each with its leading space). */
export function tokensOf(a: CanaryAnswer): string[] {
  return a.tokens ?? a.text.split(/(?=\s)/).filter((w) => w !== "");
}

/** Why an answer is wrong on its own (no expectation needed): a non-finite logprob. Null when none. */
export function selfCheck(a: CanaryAnswer): string | null {
  const bad = (a.logprobs ?? []).findIndex((x) => !Number.isFinite(x));
  return bad >= 0 ? `logprob of token ${bad} is not finite (NaN/Inf)` : null;
}

/** Null when `got` matches `want` within the tolerance, else what differs. */
export function compareAnswers(got: CanaryAnswer, want: CanaryAnswer, tol: CanaryTolerance): string | null {
  const own = selfCheck(got);
  if (own) return own;
  const g = tokensOf(got).slice(0, tol.prefixTokens);
  const w = tokensOf(want).slice(0, tol.prefixTokens);
  const n = Math.min(tol.prefixTokens, Math.max(g.length, w.length));
  for (let i = 0; i < n; i++) {
    if (g[i] !== w[i]) return `token ${i} is ${JSON.stringify(g[i] ?? "")}, expected ${JSON.stringify(w[i] ?? "")}`;
  }
  if (got.logprobs && want.logprobs) {
    for (let i = 0; i < Math.min(n, got.logprobs.length, want.logprobs.length); i++) {
      const d = Math.abs(got.logprobs[i] - want.logprobs[i]);
      if (d > tol.logprobDelta) return `logprob of token ${i} off by ${d.toFixed(3)} (> ${tol.logprobDelta})`;
    }
  }
  return null;
}

/** What a set of answers is compared on: the prefix tokens, one string (answers within tolerance of one another share it unless logprobs differ). */
export function signatureOf(a: CanaryAnswer, tol: CanaryTolerance): string {
  return JSON.stringify(tokensOf(a).slice(0, tol.prefixTokens));
}
