/** The rollout's settings (`LLMHA_ROLLOUT_*`) from the agent's configuration, checked: a bad combination is a start-up error naming the setting. */
import { DEFAULT_ROLLOUT_SETTINGS, type RolloutSettings } from "./types";

export class RolloutSettingsError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable} ${message}`);
    this.name = "RolloutSettingsError";
  }
}

export interface RolloutConfig {
  rolloutBakeMs: number;
  rolloutLatencyTolerance: number;
  rolloutErrorTolerance: number;
  rolloutLoadTimeoutMs: number;
  rolloutLoadRatio: number;
}

/** The settings with defaults filled in; throws `RolloutSettingsError` on a value the gates cannot use. */
export function resolveRolloutSettings(s: Partial<RolloutSettings> = {}): RolloutSettings {
  const r = { ...DEFAULT_ROLLOUT_SETTINGS, ...s };
  const bad = (v: number, lo: number, hi: number): boolean => !(Number.isFinite(v) && v >= lo && v <= hi);
  if (bad(r.bakeMs, 0, 7 * 86_400_000)) throw new RolloutSettingsError("LLMHA_ROLLOUT_BAKE_MS", `must be between 0 and 604800000 ms, got ${r.bakeMs}`);
  if (bad(r.latencyTolerance, 0, 10)) throw new RolloutSettingsError("LLMHA_ROLLOUT_LATENCY_TOLERANCE", `must be a share between 0 and 10 (0.2 = 20 %), got ${r.latencyTolerance}`);
  if (bad(r.errorTolerance, 0, 1)) throw new RolloutSettingsError("LLMHA_ROLLOUT_ERROR_TOLERANCE", `must be a share between 0 and 1 (0.01 = one point), got ${r.errorTolerance}`);
  if (bad(r.loadTimeoutMs, 1000, 86_400_000)) throw new RolloutSettingsError("LLMHA_ROLLOUT_LOAD_TIMEOUT_MS", `must be between 1000 and 86400000 ms, got ${r.loadTimeoutMs}`);
  if (bad(r.loadRatio, 1, 100)) throw new RolloutSettingsError("LLMHA_ROLLOUT_LOAD_RATIO", `must be between 1 and 100 (a multiple of the old revision's median load), got ${r.loadRatio}`);
  if (bad(r.latencyFloorMs, 0, 600_000)) throw new RolloutSettingsError("latencyFloorMs", `must be between 0 and 600000 ms, got ${r.latencyFloorMs}`);
  return r;
}

export function rolloutSettingsOf(cfg: RolloutConfig): RolloutSettings {
  return resolveRolloutSettings({
    bakeMs: cfg.rolloutBakeMs, latencyTolerance: cfg.rolloutLatencyTolerance, errorTolerance: cfg.rolloutErrorTolerance,
    loadTimeoutMs: cfg.rolloutLoadTimeoutMs, loadRatio: cfg.rolloutLoadRatio,
  });
}
