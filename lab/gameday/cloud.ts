/**
 * A game day on the stack's own account: AWS FIS in the stack's region, Route53's health checks
 * for the public answer, the stack's Redis for the fleet (the operator's credentials, from the
 * environment), traffic through the public edge with the game-day client key. The runner is the
 * one `--local` runs; only what it talks to differs.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FisClient } from "@aws-sdk/client-fis";
import { Route53Client } from "@aws-sdk/client-route-53";
import { createRedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { createLogger } from "../../agent/src/util/log";
import type { GamedayScenario } from "../../contracts/gameday";
import type { GamedayStack } from "../../infra/gameday/command";
import { emptyTimeline } from "../drill/timeline";
import { SCENARIOS } from "../drill/scenarios";
import { gamedayClients } from "./clients";
import { GamedayError } from "./fis";
import { writeGamedayReport } from "./report";
import { runGameday } from "./runner";
import { prometheusApi } from "../engines/prometheus";
import { cloudView, findHealthChecks } from "./views";

/** Route53's health-check API lives in us-east-1 whatever the stack's region. */
const ROUTE53_REGION = "us-east-1";

/**
 * The AZ a scenario takes out of service on this stack (`gameday.az`); null for those that take
 * none: `redis-failover` moves the Redis primary but its AZ keeps serving, and the pod scenarios
 * hit the controller or the agents' Redis path.
 */
export function scenarioAz(scenario: GamedayScenario, g: { az: string }): string | null {
  return scenario === "redis-failover" || scenario === "leader-kill" || scenario === "redis-latency" ? null : g.az;
}

export async function runCloudGameday(o: { st: GamedayStack; scenario: GamedayScenario; endpoint?: string; prometheus?: string; json?: string }): Promise<number> {
  const { cfg } = o.st;
  const spec = SCENARIOS.find((s) => s.name === o.scenario);
  if (!spec) throw new GamedayError(`the drill has no scenario ${o.scenario} to take targets from`);
  const key = gamedayKey();
  const redisUrl = process.env.LLMHA_REDIS_URL;
  if (!redisUrl) throw new GamedayError("no Redis to watch the fleet in: set LLMHA_REDIS_URL (and LLMHA_REDIS_USER / LLMHA_REDIS_PASSWORD_FILE for the ops role)");
  if (!o.endpoint && !cfg.dns.serviceName) throw new GamedayError(`no public edge to send traffic to: set ${o.st.project}:dns.serviceName in ${o.st.file}, or pass --endpoint https://host`);
  let endpoint: URL;
  try {
    endpoint = new URL(o.endpoint ?? `https://${cfg.dns.serviceName}`);
  } catch {
    throw new GamedayError(`--endpoint ${JSON.stringify(o.endpoint)} is not a URL (https://host[:port])`);
  }
  const https = endpoint.protocol === "https:";
  const port = Number(endpoint.port || (https ? 443 : 80));
  const active = cfg.azs.filter((a) => a !== cfg.standbyAz);
  const t0 = Date.now();
  const now = (): number => Date.now() - t0;
  const progress = (line: string): void => void process.stderr.write(`[gameday ${(now() / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
  const fis = new FisClient({ region: cfg.region });
  const r53 = new Route53Client({ region: ROUTE53_REGION });
  const checks = await findHealthChecks(r53, o.st.stack, cfg.azs);
  const redis = createRedisClient(redisUrl, { name: "llmha-gameday", log: createLogger({ level: "silent" }), connectTimeoutMs: 2000, commandTimeoutMs: 2000 });
  const tl = emptyTimeline();
  const abort = new AbortController();
  const onSig = (): void => abort.abort();
  process.once("SIGINT", onSig);
  try {
    const run = await runGameday({
      fis, scenario: o.scenario, environment: o.st.stack, az: scenarioAz(o.scenario, cfg.gameday), activeAzs: active,
      view: cloudView({ r53, checks, redis: redis.redis, keys: new RedisKeys(cfg.clusterName), azs: cfg.azs, close: () => redis.close() }),
      clients: gamedayClients({ edge: { baseUrl: () => endpoint.origin, address: () => endpoint.hostname, port, https, host: endpoint.hostname }, apiKey: key, model: cfg.inference.model, timeline: tl, now }),
      model: cfg.inference.model, requestTimeoutMs: 60_000, now, progress, signal: abort.signal, timeline: tl,
      // Route53 checks every 10 s and needs failureThreshold misses: a minute or more either way.
      sampleMs: 2000, steadyWaitMs: 120_000, leadMs: 60_000, recoveryWaitMs: 20 * 60_000,
      prometheus: o.prometheus ? prometheusApi(o.prometheus) : undefined,
    });
    const outDir = mkdtempSync(join(tmpdir(), "llmha-gameday-"));
    const written = writeGamedayReport({ source: "aws", spec, run, drill: null, outDir, json: o.json, startedAt: new Date(t0), command: `llm-ha gameday ${process.argv.slice(3).join(" ")}`.trim(), azs: active });
    process.stdout.write(written.text);
    return written.pass ? 0 : 1;
  } finally {
    process.removeListener("SIGINT", onSig);
  }
}

/** The game-day client key from the environment (never a flag: argv is visible to every user of the machine). */
export function gamedayKey(env: NodeJS.ProcessEnv = process.env): string {
  const k = env.LLMHA_GAMEDAY_KEY ?? (env.LLMHA_GAMEDAY_KEY_FILE ? readFileSync(env.LLMHA_GAMEDAY_KEY_FILE, "utf8").trim() : "");
  if (!k) throw new GamedayError("no client key for the game day's traffic: set LLMHA_GAMEDAY_KEY (or LLMHA_GAMEDAY_KEY_FILE) to a key made with llm-ha keys add --tenant gameday");
  return k;
}
