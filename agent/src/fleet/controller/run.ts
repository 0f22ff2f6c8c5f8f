/**
 * The controller apart from the GPU nodes (`LLMHA_ROLE=controller`): the same image
 * and the same fenced lease as every agent, but no node to check. It contends, and whichever
 * replica leads runs the controller and the actuator; GPU-node agents (`LLMHA_ROLE=node`)
 * never contend, so the cloud credential lives only here. Its HTTP port answers `/livez`,
 * `/readyz` (Redis reachable), `/status` (the fleet part) and `/metrics`.
 */
import { createServer, type Server } from "node:http";
import { readFileSync } from "node:fs";
import { collectDefaultMetrics, Registry } from "prom-client";
import { createActuator } from "../actuators/index";
import type { AgentConfig } from "../../config/spec";
import { redisAuthFromEnv } from "../redis/auth";
import type { Logger } from "../../util/log";
import { safeUrl } from "../../util/log";
import { Fleet, type FleetOptions } from "./fleet";
import type { CanaryTolerance } from "../../node/canary/answers";
import { inventoryFromSetting } from "../inventory/inventory";
import { jwksFromSetting } from "../identity/jwks";
import { parseRepairSpare, repairLadderSettings } from "../repair/settings";
import { createRepairActuator } from "../actuators/repair-index";
import { createRolloutActuator } from "../actuators/rollout-index";
import { rolloutSettingsOf } from "../rollout/settings";
import { parseStandbySchedule } from "../actuators/karpenter/settings";

/** The fleet settings every role reads from the agent's configuration, in one place. */
export function fleetOptions(cfg: AgentConfig, log: Logger, metrics: Registry, tolerance: CanaryTolerance): FleetOptions {
  return {
    redisUrl: cfg.redisUrl!,
    cluster: cfg.cluster,
    nodeId: cfg.nodeId,
    az: cfg.az,
    intervalMs: cfg.intervalMs,
    lease: { ttlMs: cfg.leaseTtlMs, renewMs: cfg.leaseRenewMs, contendMs: cfg.leaseContendMs, marginMs: Math.min(2000, Math.floor(cfg.leaseTtlMs / 5)) },
    controller: { standbyAz: cfg.standbyAz, standbyHoldMs: cfg.standbyHoldMs, standbyCapacityRatio: cfg.standbyCapacityPercent / 100, coldStartGraceMs: cfg.coldStartGraceMs, zonalShift: cfg.zonalShift },
    // With a standby AZ, practices run on request (`llm-ha practice`) even without a schedule.
    practice: cfg.standbyAz ? { cron: cfg.practiceWake, timeZone: cfg.practiceWakeTz, budgetMs: cfg.practiceWakeBudgetMs } : undefined,
    // Karpenter has no scheduled scaling: the leader parks and wakes the standby on the stack's crons.
    standbySchedule: cfg.capacityEngine === "karpenter" && cfg.standbySchedule && cfg.standbyAz ? { spec: parseStandbySchedule(cfg.standbySchedule), timeZone: cfg.standbyScheduleTz } : undefined,
    log,
    metrics,
    tls: cfg.redisCaFile ? { ca: readFileSync(cfg.redisCaFile) } : undefined,
    ...redisAuthFromEnv({ LLMHA_REDIS_USER: cfg.redisUser ?? undefined, LLMHA_REDIS_PASSWORD_FILE: cfg.redisPasswordFile ?? undefined }),
    // A node's answers older than 5 rounds are a node gone or a model changed: no vote.
    canary: cfg.canaryIntervalMs > 0 ? { tolerance, maxAgeMs: 5 * cfg.canaryIntervalMs } : undefined,
    // Node agents never lead; the controller checks no node.
    contend: cfg.role !== "node",
    // Only a process that may lead reads the inventory (a GPU node's agent holds no cluster credential).
    inventory: cfg.role === "node" ? undefined : inventoryFromSetting(cfg.inventory, { selector: cfg.inventorySelector, tokenFile: cfg.inventoryTokenFile, caFile: cfg.inventoryCaFile, env: process.env }) ?? undefined,
    // Node identities: the agent enrols with its node's token; the leader verifies against the issuer's keys.
    identityTokenFile: cfg.role === "controller" ? undefined : cfg.identityTokenFile ?? undefined,
    identities: cfg.role === "node" || cfg.identityJwks === "none" ? undefined : { jwks: jwksFromSetting(cfg.identityJwks, { tokenFile: cfg.inventoryTokenFile, caFile: cfg.inventoryCaFile, env: process.env }), issuer: cfg.identityIssuer },
    register: cfg.role !== "controller",
    // `act`: only a process that may lead gets the repair actuator (Kubernetes and EC2, the drill's local cloud, or dry-run).
    repair: cfg.repairMode === "off" ? undefined : {
      mode: cfg.repairMode, spare: parseRepairSpare(cfg.repairSpare), settings: repairLadderSettings(cfg),
      act: { settleMs: cfg.repairSettleMs, drainTimeoutMs: cfg.repairDrainTimeoutMs, waitTimeoutMs: cfg.repairWaitTimeoutMs, replacementTimeoutMs: cfg.repairReplacementTimeoutMs },
      actuator: cfg.repairMode === "act" && cfg.role !== "node" ? createRepairActuator(cfg, log, process.env) : undefined,
    },
    // Rollouts: only a process that may lead gets the rollout actuator (rollout-index.ts).
    rollout: { ...createRolloutActuator(cfg, log), settings: rolloutSettingsOf(cfg) },
  };
}

/** The longest wake back-off, as a multiple of the first (`LLMHA_STANDBY_WAKE_BACKOFF_MS`): 5 min grows to 1 h. */
const WAKE_BACKOFF_DOUBLINGS_CAP = 12;

/** Only a process that may lead gets the actuator; every call goes through the fencing gate with its term's token. */
export async function attachActuator(fleet: Fleet, cfg: AgentConfig): Promise<void> {
  if (cfg.role === "node") return;
  fleet.attachActuator(await createActuator(cfg, fleet.actuatorDeps()), {
    shiftExpiryMs: cfg.shiftExpiryMs,
    reassertMs: Math.min(30_000, Math.floor(cfg.shiftExpiryMs / 3)),
    backoffBaseMs: cfg.standbyWakeBackoffMs,
    backoffMaxMs: cfg.standbyWakeBackoffMs * WAKE_BACKOFF_DOUBLINGS_CAP,
  });
}

export interface RunningController {
  fleet: Fleet;
  shutdown(reason: string): Promise<void>;
}

function listenHttp(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
}

/** `llm-ha agent` with `LLMHA_ROLE=controller`: contends for the lease and, leading, runs the controller and the actuator. */
export async function runController(cfg: AgentConfig, log: Logger): Promise<RunningController> {
  const registry = new Registry();
  // Its own `node` (the pod) and `az` (`controller`) on every series, as each agent's: the leader-only alerts join on them.
  registry.setDefaultLabels({ node: cfg.nodeId, az: cfg.az });
  collectDefaultMetrics({ register: registry, prefix: "llmha_process_" });
  const fleet = new Fleet(fleetOptions(cfg, log, registry, { prefixTokens: cfg.canaryPrefixTokens, logprobDelta: cfg.canaryLogprobTolerance }));
  await attachActuator(fleet, cfg);
  const send = (res: import("node:http").ServerResponse, code: number, body: string, type = "application/json"): void => {
    res.writeHead(code, { "content-type": type, "cache-control": "no-store" });
    res.end(body);
  };
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, JSON.stringify({ error: "read-only endpoint: use GET" }));
    if (path === "/livez") return send(res, 200, JSON.stringify({ alive: true }));
    // Ready while Redis answers: a replica that cannot reach it can neither lead nor take over.
    if (path === "/readyz") return send(res, fleet.client.connected ? 200 : 503, JSON.stringify({ role: "controller", redis: fleet.client.connected }));
    if (path === "/status") return send(res, 200, JSON.stringify({ nodeId: cfg.nodeId, role: "controller", fleet: fleet.status() }));
    if (path === "/metrics") {
      void registry.metrics().then((m) => send(res, 200, m, registry.contentType), (err: unknown) => send(res, 500, String(err), "text/plain"));
      return;
    }
    send(res, 404, JSON.stringify({ error: `no such endpoint: ${path}`, endpoints: ["/livez", "/readyz", "/status", "/metrics"] }));
  });
  server.requestTimeout = 5000;
  server.headersTimeout = 5000;
  try {
    await listenHttp(server, cfg.bindAddress, cfg.httpPort);
  } catch (err) {
    await fleet.stop();
    throw err;
  }
  fleet.start(() => {
    throw new Error("the controller registers no node");
  });
  log.info({ event: "started", role: "controller", nodeId: cfg.nodeId, cluster: cfg.cluster, redis: safeUrl(cfg.redisUrl!), httpPort: cfg.httpPort, actuator: cfg.actuator }, "llm-ha controller started");
  let stopping: Promise<void> | null = null;
  return {
    fleet,
    shutdown: (reason) =>
      (stopping ??= (async () => {
        log.info({ event: "shutdown", reason }, `shutting down (${reason}): releasing the lease`);
        await fleet.stop().catch((err: unknown) => log.warn({ err: (err as Error).message }, "fleet stop failed"));
        await new Promise<void>((r) => server.close(() => r()));
        server.closeAllConnections?.();
        log.info({ event: "stopped" }, "llm-ha controller stopped");
      })()),
  };
}
