import type { Server } from "node:net";
import { Agent } from "./node/agent";
import type { Fleet } from "./fleet/controller/fleet";
import type { NodeReport } from "./fleet/redis/registry";
import { encodeGpuFault, gpuFaultOf } from "./node/sources/gpu-fault";
import { GpuWarningTracker } from "./node/sources/gpu-warn";
import type { AgentConfig } from "./config/spec";
import { AgentCheckResponder, startAgentCheckServer } from "./node/reporters/agent-check";
import { startHttpServer } from "./node/reporters/http";
import type { AzHealthResponse } from "./fleet/controller/az-health";
import { AgentMetrics } from "./node/reporters/metrics";
import { takesTraffic } from "./types";
import { createLogger, safeUrl, type Logger } from "./util/log";
import { sleep } from "./util/net";
import { measured, quantile } from "./util/stats";
import type { CanaryTolerance } from "./node/canary/answers";
import { canaryDrains } from "./node/canary/decide";
import { CanaryRunner } from "./node/canary/runner";
import { splitUserinfo } from "./node/sources/credential";
import { modelKey, normalizeDtype } from "./node/evaluator/model-sameness";

/** Start-up failure that is not a bad setting (a port in use): exit 1 with this message. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StartupError";
  }
}

export interface RunningAgent {
  agent: Agent;
  shutdown(reason: string): Promise<void>;
}

/** What `llm-ha agent` runs for its `LLMHA_ROLE`: the controller alone, or the node agent (`all`, `node`). */
export async function runRole(cfg: AgentConfig, log: Logger = createLogger({ level: cfg.logLevel })): Promise<{ shutdown(reason: string): Promise<void> }> {
  if (cfg.role === "controller") {
    const { runController } = await import("./fleet/controller/run.js");
    return listen("HTTP", "LLMHA_HTTP_PORT", cfg.httpPort, () => runController(cfg, log));
  }
  return runAgent(cfg, log);
}

async function listen<T>(what: string, variable: string, port: number, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "EADDRINUSE" ? "is already in use" : code === "EACCES" ? "needs privileges" : (err as Error).message;
    throw new StartupError(`${what} port ${port} (${variable}) ${why}`);
  }
}

/** The node's record in Redis: at each heartbeat, and at once when the decision changes. */
function publishReports(cfg: AgentConfig, agent: Agent, fleet: Fleet, servedReport: FleetCode["servedReport"]): void {
  // Corrected-ECC rise and slowdown episodes: fed from each new nvidia-smi result when a report is made.
  const warnings = new GpuWarningTracker();
  const gpuFault = (): string => {
    warnings.observe(agent.signals.gpu, Date.now());
    return encodeGpuFault(gpuFaultOf(agent.signals, warnings.current(Date.now())));
  };
  const report = (): NodeReport => ({
    nodeId: cfg.nodeId,
    az: cfg.az,
    decision: agent.decision,
    gpus: takesTraffic(agent.decision) ? agent.gpus.length : 0,
    gpusExpected: cfg.gpuCount ?? agent.gpus.length,
    // What the server says it serves, not what is configured (the leader compares them).
    ...servedReport(agent.modelIdentity),
    // Which XID, what the driver asks for, row remaps, warnings: the leader's repair ladder picks the cheapest fix from them.
    gpuFault: gpuFault(),
  });
  agent.once("decision", () => fleet.start(report));
  agent.on("decision", (_d, changed) => {
    agent.setSuspects(new Set(fleet.suspectChecks));
    // Publish a change at once rather than at the next heartbeat: the L2 tier reads it.
    if (changed) fleet.registry.heartbeat(report()).catch(() => undefined);
  });
}

/** The fleet's code (Redis client, lease, controller, rollout side), for an agent with a Redis URL. */
async function loadFleetCode(): Promise<FleetCode> {
  const [run, fleet, registry, rollout] = await Promise.all([import("./fleet/controller/run.js"), import("./fleet/controller/fleet.js"), import("./fleet/redis/registry.js"), import("./node/rollout-side.js")]);
  return { ...run, ...fleet, servedReport: registry.servedReport, ...rollout };
}
type FleetCode = typeof import("./fleet/controller/run.js") & typeof import("./fleet/controller/fleet.js") & typeof import("./node/rollout-side.js") & Pick<typeof import("./fleet/redis/registry.js"), "servedReport">;

function standaloneAzHealth(agent: Agent, az: string): AzHealthResponse {
  // Without Redis there is no fleet view: answer from this node, flagged stale, and never fail closed.
  const gpus = agent.gpus.length;
  const healthy = takesTraffic(agent.decision) ? gpus : 0;
  return {
    code: 200,
    body: { az, state: healthy > 0 ? "OK" : "UNKNOWN", healthyCapacity: healthy, totalCapacity: gpus, leader: null, fencingToken: null, stale: true, staleReason: "not-published" },
  };
}

function canaryTolerance(cfg: AgentConfig): CanaryTolerance {
  return { prefixTokens: cfg.canaryPrefixTokens, logprobDelta: cfg.canaryLogprobTolerance };
}

/** Correctness canaries: the runner, fed by the agent's view of its server and sharing answers through the fleet's Redis. */
function startCanaries(cfg: AgentConfig, agent: Agent, fleet: Fleet | null, log: Logger, metrics: AgentMetrics): CanaryRunner {
  return new CanaryRunner({
    kind: cfg.inferenceKind,
    // Without its user part (fetch refuses a URL with credentials): they go as headers, as the probe's do.
    baseUrl: splitUserinfo(cfg.inferenceUrl).url,
    auth: () => agent.authHeaders(),
    nodeId: cfg.nodeId,
    az: cfg.az,
    intervalMs: cfg.canaryIntervalMs,
    maxTokens: cfg.canaryMaxTokens,
    timeoutMs: cfg.probeTimeoutMs,
    tolerance: canaryTolerance(cfg),
    served: () => {
      const i = agent.modelIdentity;
      return i ? { id: agent.model, key: modelKey({ id: i.id, revision: i.revision ?? null, dtype: normalizeDtype(i.dtype), maxContext: i.maxContext ?? null }) } : null;
    },
    // Not while the server drains: its preStop hook waits for it to hold no request.
    ready: () => agent.signals.model?.value.kind === "ready" && !agent.isDraining,
    serverStarts: () => agent.serverStarts,
    fleet: () => (fleet ? { redis: fleet.client.redis, keys: fleet.keys, recordKey: fleet.registry.ownRecordKey } : null),
    log,
    registry: metrics.registry,
    onChange: (s) => agent.setCanaryMismatch(canaryDrains(s) ? s.detail || "answers differ" : null),
    onRound: (r) => agent.deepCheck.canaryRound(r),
  });
}

/** The engine's corrupted-requests counter, on every read of its metrics: a rise re-checks the canary at once. */
function feedCanaries(agent: Agent, canary: CanaryRunner): void {
  agent.on("engine", (e) => canary.engineCorrupted(e?.corruptedRequests ?? null));
}

/**
 * The agent's `main`: sources → evaluator → reporters, wired in one place.
 * Returns once everything listens; `shutdown` drains first, then stops.
 */
export async function runAgent(cfg: AgentConfig, log: Logger = createLogger({ level: cfg.logLevel })): Promise<RunningAgent> {
  const metrics = new AgentMetrics(cfg.nodeId, cfg.az);
  const agent = new Agent(cfg, log, metrics);
  // Redis, the lease, the controller and the rollout side are loaded only where there is a Redis URL:
  // a standalone agent never needs them, and they are most of what the agent would hold in memory.
  const fleetCode = cfg.redisUrl ? await loadFleetCode() : null;
  const fleet = fleetCode ? new fleetCode.Fleet(fleetCode.fleetOptions(cfg, log, metrics.registry, canaryTolerance(cfg))) : null;
  // One live agent per node id: a second one (a copied manifest, a typo) would take turns
  // with the first in Redis and, on stopping, remove the live node (seen: a brief L4).
  const held = fleet ? await fleet.registry.nodeIdConflict(cfg.nodeId) : null;
  if (fleet && held) {
    await fleet.stop();
    const ago = held.lastHeartbeatAgoMs === null ? "" : `, last heartbeat ${held.lastHeartbeatAgoMs} ms ago`;
    throw new StartupError(`LLMHA_NODE_ID ${cfg.nodeId} is in use by another live agent (instance ${held.heldBy}${ago}): give each agent its own node id`);
  }
  if (fleet && fleetCode) await fleetCode.attachActuator(fleet, cfg);
  if (fleet && fleetCode) publishReports(cfg, agent, fleet, fleetCode.servedReport);
  const probeView = (): ReturnType<Parameters<typeof startHttpServer>[2]["probe"]> => {
    const lat = measured(agent.signals.probeLatencies ?? []);
    const q = (p: number): number | null => {
      const v = quantile(lat, p);
      return v === null ? null : Math.round(v);
    };
    const since = agent.signals.probeInFlightSince;
    const last = agent.signals.probe?.value;
    return {
      lastLatencyMs: last?.kind === "ok" ? Math.round(last.latencyMs) : null,
      p50Ms: q(0.5),
      p95Ms: q(0.95),
      inFlightMs: since != null ? Date.now() - since : null,
      last: last?.kind ?? null,
    };
  };
  const http = await listen("HTTP", "LLMHA_HTTP_PORT", cfg.httpPort, () =>
    startHttpServer(cfg.bindAddress, cfg.httpPort, {
      nodeId: cfg.nodeId,
      az: cfg.az,
      decision: () => agent.decision,
      draining: () => agent.isDraining,
      alive: () => Date.now() - agent.lastEvaluationAt < Math.max(3 * cfg.intervalMs, 5000),
      gpus: () => agent.gpus,
      model: () => agent.model,
      probe: probeView,
      azHealth: async () => (fleet ? fleet.azHealth() : standaloneAzHealth(agent, cfg.az)),
      // What the server says it serves (id, revision, dtype, context): the fleet's "same model everywhere".
      extra: () => ({ modelIdentity: agent.modelIdentity, deepCheck: agent.deepCheck.view(), ...(canary ? { canary: canary.view() } : {}), ...(fleet ? { fleet: fleet.status() } : {}) }),
      metrics: metrics.registry,
    }),
  );
  const responder = new AgentCheckResponder();
  let agentCheck: Server;
  try {
    agentCheck = await listen("agent-check", "LLMHA_AGENT_CHECK_PORT", cfg.agentCheckPort, () =>
      startAgentCheckServer(
        cfg.bindAddress,
        cfg.agentCheckPort,
        () => responder.reply(agent.decision, agent.isDraining),
        (line) => metrics.agentCheckReplies.inc({ reply: line.split(" ")[0] }),
      ),
    );
  } catch (err) {
    http.close();
    throw err;
  }
  const canary = cfg.canaryIntervalMs > 0 ? startCanaries(cfg, agent, fleet, log, metrics) : null;
  if (canary) feedCanaries(agent, canary);
  // The deep check's canary round: asked for as soon as the server is ready, not a canary period later.
  if (canary) agent.deepCheck.attachCanary(() => canary.deepCheckRound());
  // A rollout: the revisions it allows, and `perf` for its gates (continuation check included).
  const rollout = fleet && fleetCode ? fleetCode.startRolloutSide(cfg, agent, fleet, log) : null;
  agent.start();
  canary?.start();
  log.info(
    {
      event: "started",
      nodeId: cfg.nodeId,
      az: cfg.az,
      cluster: cfg.cluster,
      inference: `${cfg.inferenceKind} ${safeUrl(cfg.inferenceUrl)}`,
      model: cfg.model,
      redis: cfg.redisUrl ? safeUrl(cfg.redisUrl) : null,
      httpPort: cfg.httpPort,
      agentCheckPort: cfg.agentCheckPort,
    },
    "llm-ha agent started",
  );
  let stopping: Promise<void> | null = null;
  const shutdown = (reason: string): Promise<void> => {
    stopping ??= (async () => {
      log.info({ event: "shutdown", reason }, `shutting down (${reason}): draining for ${cfg.drainMs} ms`);
      agent.drain();
      await sleep(cfg.drainMs);
      canary?.stop();
      rollout?.stop();
      agent.stop();
      await fleet?.stop().catch((err: unknown) => log.warn({ err: (err as Error).message }, "fleet stop failed"));
      await Promise.all([new Promise<void>((r) => http.close(() => r())), new Promise<void>((r) => agentCheck.close(() => r()))]);
      http.closeAllConnections?.();
      log.info({ event: "stopped" }, "llm-ha agent stopped");
    })();
    return stopping;
  };
  return { agent, shutdown };
}
