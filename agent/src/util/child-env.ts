/**
 * The environment the agent gives the programs it runs (nvidia-smi): what a program needs to
 * start and find its libraries, never the agent's own settings. `LLMHA_*` carry the Redis URL,
 * the inference URL and AWS settings; a child that dumps core, logs its environment or is
 * replaced on the node by something hostile would otherwise hold them.
 */
const KEEP = new Set(["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "LD_LIBRARY_PATH"]);
/** The NVIDIA container runtime's and CUDA's own selectors. */
const KEEP_PREFIXES = ["NVIDIA_", "CUDA_"];

export function childEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined && (KEEP.has(k) || KEEP_PREFIXES.some((p) => k.startsWith(p)))) out[k] = v;
  }
  return out;
}
