import { setFlagsFromString } from "node:v8";
import type { AgentConfig } from "../config/spec";

/**
 * V8 without its optimising compilers (TurboFan; Maglev on Node 22), for an agent process that
 * only checks its node. Its JavaScript runs a few times a second, never long enough to pay for
 * optimising it: the compilers' background work and code cost the agent more than they saved —
 * measured side by side over 120 s, 8 GPUs, every signal on: 0.57 % of a core and 55.5 MiB peak
 * RSS with these flags against 0.72 % and 58.9 MiB without. What little heavy work it has (the
 * engine's 40 KB metrics text) runs in the regex engine's compiled code, which these flags leave
 * alone. A process that can lead the fleet (`LLMHA_ROLE=all` with Redis, `controller`) reads
 * every node's record each period and keeps them.
 */
export const LEAN_V8_FLAGS: readonly string[] = ["--no-opt", "--no-maglev"];

/** Whether this process only checks its node: `node`, or `all` without Redis (no fleet to lead). */
export function checksOnly(cfg: Pick<AgentConfig, "role" | "redisUrl">): boolean {
  return cfg.role === "node" || (cfg.role === "all" && cfg.redisUrl === null);
}

/** Sets `LEAN_V8_FLAGS` when `checksOnly(cfg)`, before the agent's code runs; returns whether it did. */
export function leanRuntime(cfg: Pick<AgentConfig, "role" | "redisUrl">): boolean {
  if (!checksOnly(cfg)) return false;
  for (const f of LEAN_V8_FLAGS) setFlagsFromString(f);
  return true;
}
