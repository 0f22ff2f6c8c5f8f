/**
 * Greedy decoding as the fake imitates it, for correctness canaries: a seeded request
 * at temperature 0 gets a deterministic answer — the same tokens, ids and logprobs from every
 * healthy server of the fleet, derived from the prompt alone — and the silent-corruption modes
 * change it the way broken arithmetic does, still with 200:
 * - `garbage`: fluent wrong text (every token another word of the vocabulary);
 * - `drift`: one token in `driftEvery` differs from the true greedy output;
 * - `nan`: the tokens are right but every logprob is NaN (where the kind returns logprobs);
 * and `noise` (0..1) adds the nondeterminism real servers have within tolerance: logprobs off by
 * up to `noise` × 0.05, and with probability `noise` the last token of the answer differs
 * (batch-dependent kernels diverge late, not in the first tokens).
 */

export const CORRUPTIONS = ["none", "garbage", "drift", "nan"] as const;
export type Corruption = (typeof CORRUPTIONS)[number];

/** Words the fake's "model" speaks: fluent enough that a wrong answer reads like a right one. */
const VOCAB = [" the", " sun", " rises", " in", " east", " water", " boils", " at", " one", " hundred", " degrees", " two", " plus", " equals", " four", " Paris", " is", " capital", " of", " France", " and", " a", " cat", " sat", " on", " mat", " blue", " sky", " over", " hills", " quiet", " river"];

/** One token: its vocabulary id, its text and its logprob. */
export interface GreedyToken {
  id: number;
  text: string;
  logprob: number;
}

/** FNV-1a fed `s` from state `h`: a stable hash, so every fake of the fleet derives the same answer from the same context. */
function fnv(s: string, h = 0x811c9dc5): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** MurmurHash3's finalizer: FNV's low bits depend on the low bits of its input alone, so a token is chosen from all of them. */
function mix(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * The true greedy tokens of a prompt. Autoregressive, as a model decodes: each token is a
 * function of the whole context before it (the prompt and the tokens so far), so the answer
 * to `prompt + its first k tokens` is exactly its remaining tokens — what a continuation
 * on another server relies on.
 */
export function trueGreedy(prompt: string, n: number): GreedyToken[] {
  const out: GreedyToken[] = [];
  let ctx = fnv(prompt);
  for (let i = 0; i < n; i++) {
    const h = mix(fnv("#", ctx));
    const id = h % VOCAB.length;
    out.push({ id, text: VOCAB[id], logprob: -((h >>> 8) % 2000) / 1000 - 0.001 });
    ctx = fnv(VOCAB[id], ctx);
  }
  return out;
}

/** Whether a request is greedy and seeded: the requests canaries send (others get the fake's plain text). */
export function isSeededGreedy(temperature: unknown, seed: unknown): boolean {
  return temperature === 0 && typeof seed === "number" && Number.isInteger(seed);
}

export interface GreedySettings {
  corruption: Corruption;
  driftEvery: number;
  noise: number;
}

/** The answer this server gives: the true greedy tokens through its corruption mode and noise. */
export function greedyAnswer(prompt: string, n: number, s: GreedySettings, random: () => number = Math.random): GreedyToken[] {
  const t = trueGreedy(prompt, n);
  const wrongOf = (g: GreedyToken): GreedyToken => {
    const id = (g.id + 7) % VOCAB.length;
    return { id, text: VOCAB[id], logprob: g.logprob };
  };
  let out = t;
  if (s.corruption === "garbage") out = t.map(wrongOf);
  else if (s.corruption === "drift") out = t.map((g, i) => ((i + 1) % Math.max(1, s.driftEvery) === 0 ? wrongOf(g) : g));
  else if (s.corruption === "nan") out = t.map((g) => ({ ...g, logprob: Number.NaN }));
  if (s.noise > 0 && s.corruption !== "nan") {
    out = out.map((g) => ({ ...g, logprob: Math.min(0, g.logprob + (random() * 2 - 1) * s.noise * 0.05) }));
    if (out.length > 1 && random() < s.noise) out[out.length - 1] = wrongOf(out[out.length - 1]);
  }
  return out;
}

/** Text of a user completion (not a canary) while corrupted: fluent and wrong, as corrupted weights answer. */
export function corruptText(prompt: string, n: number): string {
  return trueGreedy(`${prompt}~wrong`, n)
    .map((g) => g.text)
    .join("");
}

/** OpenAI's `logprobs` object of a completion choice; NaN written as Python's `json.dumps` writes it. */
export function openaiLogprobs(tokens: readonly GreedyToken[]): unknown {
  return { tokens: tokens.map((g) => g.text), token_logprobs: tokens.map((g) => g.logprob), token_ids: tokens.map((g) => g.id), top_logprobs: null, text_offset: [] };
}

/** JSON as a Python server writes it: non-finite numbers as bare `NaN` (what `json.dumps` does by default). */
export function pythonJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? "__NaN__" : v)).replace(/"__NaN__"/g, "NaN");
}
