/**
 * The agent's side of a rollout, wired to its fleet's Redis (main.ts starts it beside the
 * canaries): the revisions the rollout allows (rollout-allow.ts) feed the evaluator; the
 * continuation check (continuation-check.ts), the engine's corrupted count and the probe window
 * feed `perf`, published into the node's own record (perf.ts). Without Redis there is no rollout
 * and nobody reads `perf`: nothing runs.
 */
import type { AgentConfig } from "../config/spec";
import type { Redis } from "ioredis";
import type { RedisKeys } from "../fleet/redis/keys";
import type { NodeRegistry } from "../fleet/redis/registry";
import type { Logger } from "../util/log";
import type { Agent } from "./agent";
import { ContinuationCheck } from "./continuation-check";
import { PerfPublisher } from "./perf";
import { RolloutAllowWatch } from "./rollout-allow";
import { splitUserinfo } from "./sources/credential";

/** How often the rollout's `allow` is read: every few periods (one HGET per node; a rollout's steps take minutes). */
export const ROLLOUT_ALLOW_PERIODS = 5;

export interface RolloutSide {
  readonly allow: RolloutAllowWatch;
  readonly continuation: ContinuationCheck;
  readonly perf: PerfPublisher;
  stop(): void;
}

/** What it needs of the agent's fleet membership (the controller's `Fleet` has it). */
export interface RolloutFleet {
  readonly client: { readonly redis: Redis; readonly connected: boolean };
  readonly keys: RedisKeys;
  readonly registry: Pick<NodeRegistry, "lastHeartbeatAt" | "failing" | "heldBy" | "ownRecordKey" | "ttlMs">;
}

export function startRolloutSide(cfg: AgentConfig, agent: Agent, fleet: RolloutFleet, log: Logger, opts: { continuationPeriodMs?: number } = {}): RolloutSide {
  const redis = fleet.client.redis;
  const allow = new RolloutAllowWatch({
    read: () => redis.hget(fleet.keys.rollout, "allow"),
    periodMs: cfg.intervalMs * ROLLOUT_ALLOW_PERIODS,
    log,
    onChange: (a) => agent.setAllowedRevisions(a),
  });
  const continuation = new ContinuationCheck({
    kind: cfg.inferenceKind,
    // Without its user part (fetch refuses a URL with credentials): they go as headers, as the probe's do.
    baseUrl: splitUserinfo(cfg.inferenceUrl).url,
    model: () => agent.model,
    ready: () => agent.signals.model?.value.kind === "ready",
    auth: () => agent.authHeaders(),
    log,
    timeoutMs: cfg.probeTimeoutMs,
    periodMs: opts.continuationPeriodMs,
    onResult: (c) => agent.perf.setContinuation(c),
  });
  const perf = new PerfPublisher({
    snapshot: () => agent.perf.snapshot(agent.modelIdentity?.revision ?? "", Date.now()),
    target: () => {
      const r = fleet.registry;
      // Only beside a live registration: never a record for an id another agent holds, or before the first heartbeat.
      if (r.lastHeartbeatAt === null || r.failing || r.heldBy !== null || !fleet.client.connected) return null;
      const own = r.ownRecordKey;
      if (own === null) return null;
      return { redis, key: own ?? fleet.keys.node(cfg.nodeId), ttlMs: r.ttlMs };
    },
    periodMs: cfg.intervalMs,
    log,
  });
  agent.on("engine", (e) => agent.perf.engine(e?.corruptedRequests ?? null));
  agent.on("serverStart", () => continuation.serverStarted());
  // A newly served revision the check would refuse: what the rollout allows is read before it is judged.
  agent.revisionRefresh = () => allow.runOnce();
  allow.start();
  continuation.start();
  perf.start();
  return {
    allow,
    continuation,
    perf,
    stop() {
      allow.stop();
      continuation.stop();
      perf.stop();
    },
  };
}
