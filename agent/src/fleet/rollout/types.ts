/**
 * A model or engine rollout, AZ by AZ, carried out by the fenced leader (the shapes every part
 * shares: the pure plan and gates, the leader's runner, the actuators, the agent's side, the CLI).
 *
 * How it goes:
 * - An operator (`llm-ha rollout start --to REV`) or the Pulumi program (a changed model revision)
 *   writes a request; the leader acts on it once, in its next period.
 * - The steps: the standby AZ first where it serves (else one canary node of the first AZ, where
 *   the actuator can change one node), then each AZ in turn. Never two AZs in flux: a step's nodes
 *   are all in one AZ, and the next step starts only when this one has baked.
 * - Within a step the nodes change in batches that keep the AZ at or above its capacity floor; a
 *   node's share of traffic ramps through HAProxy weights as it comes back (the agent's warmup
 *   ramp, 25 → 50 → 75 → 100 %).
 * - Once every node of the step serves the new revision, its gates must hold for the bake time,
 *   comparing the new revision with the old in the same window. A failed gate rolls back: the
 *   old revision is restored on every node that has the new one, this step's first, one AZ at a
 *   time, without going below the floor.
 * - State lives in the fenced `rollout` hash: a new leader reads it and goes on (or rolls back).
 * - While a rollout is active, agents accept both revisions (the hash's `allow`) instead of
 *   reporting `MODEL_MISMATCH`, and the leader's model-sameness check does not count them as
 *   outliers; once it ends, the fleet's revision is the hash's `current`, and the check applies again.
 */

/** What a node serves: the revision its server reports (vLLM `root`, TGI `model_sha`), and the engine image where the actuator sets one. */
export interface Revision {
  revision: string;
  /** The inference image (by digest) where the change is an engine change; absent: unchanged. */
  image?: string;
}

/**
 * - `switching`: the step's nodes are being moved to the new revision (in batches within the floor);
 * - `baking`: every node of the step serves the new revision; the gates are watched for `bakeMs`;
 * - `paused`: an operator's pause: no node is switched and the bake does not end (a failed gate still rolls back);
 * - `rolling-back`: a gate failed or an operator aborted: the old revision is being restored;
 * - terminal: `promoted` (every step baked), `rolled-back` (a failed gate, restored),
 *   `aborted` (an operator's abort, restored).
 */
export const ROLLOUT_PHASES = ["switching", "baking", "paused", "rolling-back", "promoted", "rolled-back", "aborted"] as const;
export type RolloutPhase = (typeof ROLLOUT_PHASES)[number];
export const TERMINAL_PHASES: readonly RolloutPhase[] = ["promoted", "rolled-back", "aborted"];

export interface RolloutStep {
  /** 0-based position in the order. */
  index: number;
  az: string;
  /** `standby`: the standby AZ; `canary`: one node of an AZ; `az`: an AZ's (remaining) nodes. */
  kind: "standby" | "canary" | "az";
  /** Node ids of the step (all in `az`). */
  nodes: string[];
  /** Nodes asked to switch so far (to the new revision; while rolling back: restored so far). */
  switched: string[];
  /**
   * Epoch ms each node was asked to switch to the new revision: the load-time gate's clock, and
   * what a rollback restores (every node asked, whether it came up or not). Absent in states
   * written before it existed: then every node of a step before the current one counts as asked.
   */
  askedAt?: Record<string, number>;
}

export const GATES = ["canary", "errors", "latency", "continuation", "load-time", "corruption", "capacity"] as const;
export type GateName = (typeof GATES)[number];

/** `wait`: not enough evidence yet (no canary round since the switch, no probes): the bake does not end on it, and it is no failure. */
export interface GateVerdict {
  gate: GateName;
  verdict: "pass" | "fail" | "wait";
  /** One line a reader understands: what was compared and the numbers. */
  detail: string;
}

export interface RolloutState {
  /** The request's id (the operator's, or the Pulumi program's `pulumi-<hash>`). */
  id: string;
  from: Revision;
  to: Revision;
  steps: RolloutStep[];
  /** Index of the step under way (while rolling back: the step being restored). */
  step: number;
  phase: RolloutPhase;
  /** Phase before a pause (to resume into). */
  pausedFrom?: RolloutPhase;
  /** Epoch ms the rollout started, the current phase began, the step's last node was switched (null before). */
  startedAt: number;
  since: number;
  switchedAt: number | null;
  bakeMs: number;
  /** The latest verdict of each gate (the current step's). */
  gates: GateVerdict[];
  /** Why the phase is what it is (a failed gate's detail, the operator's abort, …). */
  reason: string;
  /** What started the rollback (the failed gate, or `abort`); absent while none did. */
  cause?: GateName | "abort";
  /** Who asked: `operator`, `pulumi`. */
  by: string;
  updatedAt: number;
}

/**
 * An operator's or the Pulumi program's request (`rollout:request`, JSON), acted on once per id:
 * `start` needs `to`; `pause`, `resume`, `abort`, `promote` (end the current step's bake now,
 * when no gate fails) name the rollout they mean by `id`.
 */
export interface RolloutRequest {
  op: "start" | "pause" | "resume" | "abort" | "promote";
  id: string;
  at: number;
  to?: Revision;
  bakeMs?: number;
  by?: string;
}

/**
 * What an agent publishes for the gates (node record field `perf`, JSON; written by the agent,
 * bound to its identity like the rest of its record), refreshed every period:
 */
export interface NodePerf {
  /** Epoch ms of the sample. */
  at: number;
  /** The revision the server reports now ("" unknown). */
  revision: string;
  /** Probe latency median over the agent's probe window (ms), null before any probe answered. */
  p50Ms: number | null;
  /** Probes in the window, and of those failed (errors or timeouts). */
  probes: number;
  errors: number;
  /** How long the server's last model load took (not ready → ready, ms); null while it never loaded under this agent. */
  loadMs: number | null;
  /** Engine-reported corrupted requests (vLLM `vllm:corrupted_requests`) since the server last started; null: not exported. */
  corrupted: number | null;
  /** The last continuation check (the edge's resume request shape, sent to this server): null before one ran. */
  continuation: "ok" | "refused" | "error" | null;
}

/** Settings of the rollout and its gates (`LLMHA_ROLLOUT_*`). */
export interface RolloutSettings {
  /** How long a step's gates must hold once every node of it serves the new revision. Default 300000 (5 min). */
  bakeMs: number;
  /** The new revision's probe p50 may exceed the old's by this share (0.2 = 20 %) before the latency gate fails. */
  latencyTolerance: number;
  /** …and by at least this many ms (small absolute differences are noise). Default 5. */
  latencyFloorMs: number;
  /** The new revision's probe error share may exceed the old's by this much (0.01 = one point). */
  errorTolerance: number;
  /** A switched node not serving the new revision this long after its switch fails the load-time gate. Default 1800000. */
  loadTimeoutMs: number;
  /** …and its model load may take at most this multiple of the old revision's median load (where known). Default 3. */
  loadRatio: number;
}

export const DEFAULT_ROLLOUT_SETTINGS: RolloutSettings = {
  bakeMs: 300_000,
  latencyTolerance: 0.2,
  latencyFloorMs: 5,
  errorTolerance: 0.01,
  loadTimeoutMs: 1_800_000,
  loadRatio: 3,
};

export interface RolloutSwitchRequest {
  rolloutId: string;
  az: string;
  /** The nodes to change, with their cloud host (instance) where known. */
  nodes: { nodeId: string; host: string }[];
  to: Revision;
  /** Fencing token of the leader term asking. */
  token: number;
}

export interface RolloutSwitchResult {
  outcome: "applied" | "already" | "dry-run" | "refused-stale" | "failed";
  detail: string;
}

/**
 * What changes the revision a node serves. `granularity` says what one call can change:
 * `node` (the drill's local cloud: one simulated node) or `az` (Kubernetes: the AZ's inference
 * Deployment's template; its own rolling update, one pod at a time, moves the pods).
 */
export interface RolloutActuator {
  readonly kind: string;
  readonly granularity: "node" | "az";
  switch(req: RolloutSwitchRequest): Promise<RolloutSwitchResult>;
}
