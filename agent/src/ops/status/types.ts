/**
 * The shape of what `llm-ha status` shows; also the `--json` document (docs/status.md):
 * add fields freely, bump `STATUS_JSON_VERSION` when one changes meaning.
 */
import type { AzState, TierLevel } from "../../../../contracts/controller";
import type { NodeView } from "../../fleet/redis/registry";
import type { RolloutRequest, RolloutState } from "../../fleet/rollout/types";

export const STATUS_JSON_VERSION = 1;

export interface LeaderView {
  /** Holder id of the lease (`<nodeId>/<pid>`), null when no one leads. */
  holder: string | null;
  /** Fencing token of the current lease. */
  token: number | null;
  /** Milliseconds before the lease expires unless renewed. */
  ttlMs: number | null;
  /** Highest token Redis has accepted a write from (`fence:last`): lower ones are refused. */
  highestToken: number | null;
  highestHolder: string | null;
}

export interface TierView {
  level: TierLevel;
  reason: string;
  token: number | null;
  updatedAt: number | null;
  ageMs: number | null;
  /** Not refreshed by a leader for longer than the controller's stale limit (30 s). */
  stale: boolean;
}

export interface AzPublished {
  state: AzState;
  healthyCapacity: number;
  totalCapacity: number;
  nodes: number;
  nodesIn: number;
  /** Epoch ms the AZ entered this state. */
  since: number | null;
  updatedAt: number | null;
  ageMs: number | null;
  token: number | null;
  stale: boolean;
}

export interface NodeRow {
  id: string;
  az: string;
  /** `EXPIRED`: the node stopped heartbeating (its capacity still counts toward the AZ until forgotten). */
  status: NodeView["status"];
  phase: NodeView["phase"];
  /** Share of the HAProxy weight, 0–100. */
  weight: number;
  /** Lower is better (the `az:<az>:available` score); null when expired. */
  loadScore: number | null;
  gpus: number;
  gpusExpected: number;
  /** Soft reason codes: acted on, pending `fall`, or suppressed as suspect. */
  soft: string[];
  /** Hard reason codes: act at once. */
  hard: string[];
  /** The model id the node's server says it serves (not the configured one). */
  model: string | null;
  /** What the server says beyond the id, where it tells (absent from older agents' hashes). */
  modelRevision?: string | null;
  modelDtype?: string | null;
  maxContext?: number | null;
  alive: boolean;
  takesTraffic: boolean;
  /** Redis time (epoch ms) of the last heartbeat, null when unknown. */
  lastHeartbeatAt: number | null;
  heartbeatAgeMs: number | null;
}

export interface AzRow {
  az: string;
  /** The leader's publication (`az:<az>:state`); null when none (no leader yet, or a standby AZ scaled to zero). */
  published: AzPublished | null;
  /** This AZ is the standby AZ the leader may wake. */
  standby: boolean;
  nodes: NodeRow[];
}

export interface StandbyView {
  az: string;
  /** The leader's desired state: true = keep the standby AZ awake. */
  wake: boolean;
  reason: string;
  token: number | null;
  updatedAt: number | null;
  ageMs: number | null;
  /** Set while it is wanted awake and cannot be woken (every fallback step failed): why. */
  unavailable?: string;
  /** Set while it is wanted awake and a new wake waits: `backoff until …, because …` (the last wake had no healthy node). */
  backoff?: string;
}

/** The followed standby wake, from the `actuation` hash. */
export interface WakeView {
  /** `waiting`, `fallback`, `serving`, `unavailable`. */
  phase: string;
  /** `2/3`: the step in charge of the fallback order. */
  step: string;
  groups: string;
  /** `capacity on <asg>: <AWS message>`, empty when no launch failed. */
  failure: string;
  /** Decision to first standby node serving, when measured. */
  servedMs: number | null;
}

/** The last practice wake, from the `practice` hash. */
export interface PracticeView {
  /** `served`, `failed`, `skipped`, `interrupted`; null before the first one. */
  outcome: string | null;
  at: number | null;
  wakeMs: number | null;
  reason: string;
  /** A practice running now: its start. */
  runningSince: number | null;
  /** An operator's request (`llm-ha practice`) the leader has not acted on yet: its time; null when none pends. */
  requestedAt: number | null;
}

export interface ActionView {
  /** `standby.wake`, `standby.release`, `shift.start`, `shift.cancel`. */
  action: string;
  az: string;
  /** `applied`, `already`, `dry-run`, `refused-stale`, `failed`. */
  outcome: string;
  detail: string;
  reason: string;
  token: number | null;
  at: number | null;
  ageMs: number | null;
}

export interface ActuationView {
  /** `aws`, `local`, `dry-run`: what the leader acts through. */
  actuator: string;
  /** The last standby action (wake / release). */
  standby: ActionView | null;
  /** The last zonal-shift action, and when the shift ends unless renewed. */
  shift: (ActionView & { expiresAt: number | null }) | null;
  /** The AZ the leader wants traffic shifted away from, if any. */
  shiftAz: string | null;
  /** The followed standby wake, when the actuator follows it. */
  wake?: WakeView;
}

export interface SuspectView {
  /** Soft checks the blast-radius cap marked suspect: nodes failing only these are kept in. */
  codes: string[];
  /** Live nodes failing each soft check within the window. */
  counts: Record<string, number>;
  updatedAt: number | null;
  ageMs: number | null;
}

/** Same model everywhere: the leader's `models` hash, refreshed every 10 periods. */
export interface ModelsView {
  /** The fleet's majority: `id@revision dtype:… ctx:…` (unknown parts left out); null when no node serves one. */
  majority: string | null;
  /** Serving nodes that agree with it; null when not published. */
  agreeing: number | null;
  /** Nodes serving something else (the first 50), with what and which fields differ (`id`, `revision`, `dtype`, `maxContext`). */
  outliers: { nodeId: string; model: string; differs: string[] }[];
  /** Every outlier node, also those not listed. */
  outlierCount: number;
  /** AZs where no serving node serves the majority. */
  outlierAzs: string[];
  updatedAt: number | null;
  ageMs: number | null;
  /** Not refreshed by a leader for longer than the controller's stale limit. */
  stale: boolean;
}

/** The L4 queue as the fallback publishes it (`llmha:<cluster>:fallback:queue`, every 2 s, expiring after 30 s). */
export interface FallbackQueueView {
  /** Requests queued and not yet replayed (the replay group's lag plus what was produced since); null when unknown. */
  depth: number | null;
  /** Kafka topic, `llmha.<cluster>.requests`. */
  topic: string;
  updatedAt: number | null;
  ageMs: number | null;
  /** Not refreshed for longer than `FALLBACK_QUEUE_STALE_MS`: no fallback samples it any more. */
  stale: boolean;
}

/** L4 (docs/fallback.md): whether the L1 proxies send to `llm-ha fallback`, and its queue. */
export interface FallbackView {
  /** The published tier is L4 (no inference server of any AZ can serve); null when no tier is published. */
  l4: boolean | null;
  /** null when no fallback with Kafka publishes its queue. */
  queue: FallbackQueueView | null;
}

export const EVENT_TONES = ["ok", "warn", "bad", "info"] as const;
export type EventTone = (typeof EVENT_TONES)[number];

export interface EventRow {
  /** Stream id (`<ms>-<seq>`). */
  id: string;
  at: number;
  ageMs: number;
  /** `node`, `az`, `tier`, `standby`, `suspect`, `shift`, `action`, or whatever a newer writer uses. */
  type: string;
  /** One line for a person. */
  summary: string;
  /** ok = something recovered, warn = degraded, bad = out or down, info = neither. */
  tone: EventTone;
  /** Fencing token the leader wrote it with, if any. */
  token: number | null;
  /** Every field as written. */
  fields: Record<string, string>;
}

export interface IdentitiesView {
  /** Nodes with a record under their capability key now. */
  enrolled: number;
  /** Record keys the leader does not read. */
  unboundRecords: number;
  /** The node ids those keys claim (sorted, at most 20). */
  unboundNodes: string[];
}

/** The leader's inventory (its fenced `inventory` hash): the nodes shown, and `members` entries it does not list. */
export interface InventoryView {
  /** GPU nodes the inventory lists (what the leader reads, and what status shows). */
  nodes: number;
  /** `members` entries (written by agents) for nodes the inventory does not list: forged with the shared agent credential, or nodes gone. */
  notListed: number;
  /** Their ids (sorted, at most 20). */
  notListedNodes: string[];
}

export interface FleetView {
  version: typeof STATUS_JSON_VERSION;
  cluster: string;
  /** The Redis URL with the password replaced. */
  redis: string;
  /** Redis time of the read (epoch ms); every age is measured from it. */
  now: number;
  leader: LeaderView;
  tier: TierView | null;
  standby: StandbyView | null;
  /** What the leader last asked of the cloud (the `actuation` hash); null when it never acted. */
  actuation: ActuationView | null;
  suspect: SuspectView | null;
  /** L4 state and the fallback's queue depth. */
  fallback: FallbackView;
  /** The fleet's majority model and the odd nodes; null when no leader published it yet, absent in older documents. */
  models?: ModelsView | null;
  /** The last practice wake; absent when none was ever scheduled. */
  practice?: PracticeView;
  /**
   * The model or engine rollout (the leader's `rollout` hash and a pending `rollout:request`);
   * null when neither exists, absent in older documents. The text view shows it only while one is
   * active or ended within the last hour (`shown`).
   */
  rollout?: RolloutView | null;
  /** The leader's repair plan (`repair:plan`); null when no leader published one (repair mode off), absent in older documents. */
  repairs?: RepairsView | null;
  /**
   * Node identities (present only when the leader publishes record digests): nodes whose record
   * was found under their capability key, and records under any other key (`node:<id>` or
   * `node:<id>:<other>`: forged with the shared agent credential, or a capability the node no
   * longer holds, until it expires), which the leader does not read and which are not shown as nodes.
   */
  identities?: IdentitiesView;
  /**
   * Present when the leader reads an inventory (`LLMHA_INVENTORY`): the nodes and AZs shown are
   * the inventory's, as the leader sees them, never what agents write in `members` and `azs`.
   */
  inventory?: InventoryView;
  azs: AzRow[];
  events: EventRow[];
  /** Nothing of this cluster is in Redis (no members, AZs, lease, tier or events). */
  empty: boolean;
}

export interface ReadFleetViewOptions {
  /** How many of the newest events. Default 10. */
  events?: number;
  /** Shown as `redis` (pass it through `safeUrl`). Default "". */
  url?: string;
  /** Published states older than this are flagged stale. Default the controller's 30000 ms. */
  staleAfterMs?: number;
}

/** One broken node's entry in the repair plan. */
export interface RepairRow {
  nodeId: string;
  az: string;
  host: string;
  /** `restart`, `reset`, `reboot`, `replace`, `quarantine`, or `held` (a bound stops it). */
  action: string;
  /** The action it needs (held: what it waits for). */
  wanted: string | null;
  reason: string;
  fault: string;
  /** The bound that holds it (`az`, `share`, `floor`, `replacement`, `in-progress`). */
  bound: string | null;
  /** Epoch ms this decision was first made, and its age. */
  since: number;
  ageMs: number;
  /** `act` mode, a repair under way: its step (`cordon` … `terminate`, or `failed at <step>`), how long it has been at it, what it last did. */
  step?: { name: string; ageMs: number; detail: string };
}

/** The repair ladder's plan: advised actions, held nodes with their reasons, quarantined hosts. */
export interface RepairsView {
  /** `advise` (nothing is done) today. */
  mode: string;
  updatedAt: number | null;
  ageMs: number | null;
  /** Not refreshed within the stale bound: no leader publishes it. */
  stale: boolean;
  advised: RepairRow[];
  held: RepairRow[];
  quarantined: string[];
}

/** How a step of the rollout stands, as the status views word it. */
export type RolloutStepState = "baked" | "switching" | "baking" | "paused" | "pending" | "restoring" | "to restore" | "restored" | "untouched";

/** The rollout under way or the last one: the leader's `state` JSON as written, and what a reader derives from it. */
export interface RolloutStateView extends RolloutState {
  /** Not in a terminal phase (`promoted`, `rolled-back`, `aborted`). */
  active: boolean;
  /** How long the phase has lasted (`now - since`). */
  phaseAgeMs: number;
  /** While baking: how long until the step's bake ends (0: it ends when no gate waits); null otherwise. */
  bakeLeftMs: number | null;
  /** Each step's standing, by index. */
  stepStates: RolloutStepState[];
}

export interface RolloutView {
  /** The fleet's revision after the last rollout (hash `current`); null before any. */
  current: string | null;
  /** The revisions agents accept now (hash `allow`): both while a rollout is active. */
  allow: string[];
  /** The rollout under way or the last one; null when none ran (or its state cannot be read: `error`). */
  last: RolloutStateView | null;
  /** Why `state` could not be read (malformed JSON); absent when it could. */
  error?: string;
  /** Redis time of the leader's last write of the hash (its `at`), and its age. */
  writtenAt: number | null;
  ageMs: number | null;
  /** An operator's or the Pulumi program's request the leader has not acted on yet (within the last hour); null when none. */
  pending: RolloutRequest | null;
  /** The text view shows the section: a rollout is active, ended within the last hour, or a request pends. */
  shown: boolean;
}
