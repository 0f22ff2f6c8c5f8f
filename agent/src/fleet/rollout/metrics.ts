/**
 * The leader's rollout series (on the agent's registry, every known label set created at zero):
 * whether a rollout is under way, its step and phase, each gate's latest verdict, rollbacks by
 * cause and actuator switches by outcome.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import { GATES, ROLLOUT_PHASES, TERMINAL_PHASES, type GateVerdict, type RolloutState, type RolloutSwitchResult } from "./types";

export const SWITCH_OUTCOMES: readonly RolloutSwitchResult["outcome"][] = ["applied", "already", "dry-run", "refused-stale", "failed"];
const VERDICT = { pass: 1, wait: 0, fail: -1 } as const;

export class RolloutMetrics {
  readonly active: Gauge;
  readonly step: Gauge;
  readonly phase: Gauge<"phase">;
  readonly gate: Gauge<"gate">;
  readonly rollbacks: Counter<"cause">;
  readonly switches: Counter<"outcome">;

  constructor(registry: Registry) {
    const registers = [registry];
    this.active = new Gauge({ name: "llmha_rollout_active", help: "1 while a model or engine rollout is under way (switching, baking, paused or rolling back)", registers });
    this.step = new Gauge({ name: "llmha_rollout_step", help: "Index of the rollout step under way (0-based; -1 none)", registers });
    this.phase = new Gauge({ name: "llmha_rollout_phase", help: "1 for the phase of the current or last rollout", labelNames: ["phase"], registers });
    this.gate = new Gauge({ name: "llmha_rollout_gate", help: "Latest verdict of each rollout gate: 1 pass, 0 wait, -1 fail", labelNames: ["gate"], registers });
    this.rollbacks = new Counter({ name: "llmha_rollout_rollbacks_total", help: "Rollouts rolled back, by cause (the failed gate, or abort)", labelNames: ["cause"], registers });
    this.switches = new Counter({ name: "llmha_rollout_switches_total", help: "Rollout switch calls the leader made through its actuator, by outcome", labelNames: ["outcome"], registers });
    this.step.set(-1);
    for (const p of ROLLOUT_PHASES) this.phase.set({ phase: p }, 0);
    for (const g of GATES) this.gate.set({ gate: g }, 0);
    for (const c of [...GATES, "abort"]) this.rollbacks.inc({ cause: c }, 0);
    for (const o of SWITCH_OUTCOMES) this.switches.inc({ outcome: o }, 0);
  }

  /** The gauges from the state this leader wrote (or read, when nothing changed). */
  set(s: RolloutState | null): void {
    const active = s !== null && !TERMINAL_PHASES.includes(s.phase);
    this.active.set(active ? 1 : 0);
    this.step.set(active ? s.step : -1);
    for (const p of ROLLOUT_PHASES) this.phase.set({ phase: p }, s?.phase === p ? 1 : 0);
    const by = new Map<string, GateVerdict>((s?.gates ?? []).map((g) => [g.gate, g]));
    for (const g of GATES) this.gate.set({ gate: g }, active && by.has(g) ? VERDICT[by.get(g)!.verdict] : 0);
  }
}
