/**
 * The drill's settings: the agent's `LLMHA_*` values (fast, so that a full drill fits in
 * minutes on two cores), the HAProxy tuning of the llm-ha proxies (production's), and the
 * sampling periods; the baselines keep HAProxy's own check figures (what we compare to).
 */
import type { HaproxyTuning } from "../../contracts/haproxy-config";

/** Agent settings every simulated node gets. */
export const DRILL_AGENT_ENV: Readonly<Record<string, string>> = Object.freeze({
  LLMHA_INTERVAL_MS: "500",
  LLMHA_FALL: "2",
  LLMHA_RISE: "2",
  LLMHA_WARMUP_STEP_MS: "250",
  LLMHA_PROBE_LATENCY_MS: "400",
  LLMHA_PROBE_TIMEOUT_MS: "1500",
  // The fake nvidia-smi is a Node process: on two loaded cores it can take over a second to answer.
  LLMHA_GPU_TIMEOUT_MS: "2500",
  LLMHA_MODEL_TIMEOUT_MS: "500",
  // Longer than two agent-check polls (500 ms): HAProxy sees `drain` before the agent exits.
  LLMHA_DRAIN_MS: "1200",
  LLMHA_LEASE_TTL_MS: "3000",
  LLMHA_LEASE_RENEW_MS: "1000",
  LLMHA_LEASE_CONTEND_MS: "500",
  LLMHA_LOG_LEVEL: "info",
  // Correctness canaries every second (production: a minute), 12 tokens of which 8 are compared:
  // a round of 3 takes the fake about 0.7 s, so canary-noise reaches 1,000 canaries in under 2 minutes.
  LLMHA_CANARY_INTERVAL_MS: "1000",
  LLMHA_CANARY_MAX_TOKENS: "12",
  LLMHA_CANARY_PREFIX_TOKENS: "8",
});

/**
 * With a standby AZ, every agent may act as leader through the drill's local cloud; the
 * standby is handed back 3 s after the active AZs are OK again (production: 10 min), so a
 * scenario ends with it at zero. A woken standby step whose nodes are not HEALTHY 15 s after
 * its wake has failed (`unhealthy`; production: 10 min): a drill node boots and serves in
 * about 3 s, 20 s on a loaded machine at worst seen.
 */
export const DRILL_STANDBY_ENV: Readonly<Record<string, string>> = Object.freeze({
  LLMHA_ACTUATOR: "local",
  LLMHA_STANDBY_HOLD_MS: "3000",
  LLMHA_STANDBY_HEALTHY_BOUND_MS: "15000",
  LLMHA_STANDBY_WAKE_BACKOFF_MS: "10000",
});

/**
 * `standby-wake-karpenter`: the standby's capacity from the local cloud's simulated Karpenter
 * (`LLMHA_CAPACITY_ENGINE=karpenter`): the standby AZ's NodePools (`az-c`, the standby with 3
 * AZs) in fallback order, each with room for 8 nodes of 8 GPUs, and the placeholder Deployment
 * scaled to 8 replicas while woken (the simulated Karpenter boots the standby's stopped nodes,
 * as many as there are, one NodeClaim each). Shifts stay with `LLMHA_ACTUATOR=local`.
 */
export const DRILL_KARPENTER_ENV: Readonly<Record<string, string>> = Object.freeze({
  LLMHA_CAPACITY_ENGINE: "karpenter",
  LLMHA_STANDBY_NODEPOOLS: "llm-ha-az-c-p5=64,llm-ha-az-c-p4d=64",
  LLMHA_STANDBY_PLACEHOLDER: "llm-ha/llm-ha-standby-placeholder=8",
});

/** The drill's first wake back-off (ms). */
export const DRILL_WAKE_BACKOFF_MS = Number(DRILL_STANDBY_ENV.LLMHA_STANDBY_WAKE_BACKOFF_MS);

/** The drill's healthy bound of a woken standby step (ms). */
export const DRILL_HEALTHY_BOUND_MS = Number(DRILL_STANDBY_ENV.LLMHA_STANDBY_HEALTHY_BOUND_MS);

/** Numbers the scenarios and targets read from the settings above. */
export const DRILL_TIMING = Object.freeze({
  intervalMs: Number(DRILL_AGENT_ENV.LLMHA_INTERVAL_MS),
  probeLatencyMs: Number(DRILL_AGENT_ENV.LLMHA_PROBE_LATENCY_MS),
  probeTimeoutMs: Number(DRILL_AGENT_ENV.LLMHA_PROBE_TIMEOUT_MS),
  leaseTtlMs: Number(DRILL_AGENT_ENV.LLMHA_LEASE_TTL_MS),
  leaseContendMs: Number(DRILL_AGENT_ENV.LLMHA_LEASE_CONTEND_MS),
  standbyHoldMs: Number(DRILL_STANDBY_ENV.LLMHA_STANDBY_HOLD_MS),
  canaryIntervalMs: Number(DRILL_AGENT_ENV.LLMHA_CANARY_INTERVAL_MS),
  /** How often the observer polls every agent, proxy and the DNS answer. */
  sampleMs: 50,
  /** How often it reads the fleet keys in Redis. */
  redisSampleMs: 200,
});

/**
 * HAProxy tuning of the llm-ha (`agent`) proxies in the drill: none, the production defaults
 * (`DEFAULT_HAPROXY_TUNING`: checks every 500 ms, slowstart 5 s, 1 retry, timeout server and
 * client 600 s, 32 requests per server), rendered with `server-template` + `resolvers` as infra
 * renders them. What the drill measures is what production runs.
 */
export const DRILL_AGENT_TUNING: Partial<HaproxyTuning> = Object.freeze({});

/** The tuned baseline: `httpchk` inter 500 ms fall 2 (the default baseline is HAProxy's inter 2 s fall 3). */
export const DRILL_TUNED_BASELINE: Partial<HaproxyTuning> = Object.freeze({
  checkInterMs: 500,
  fall: 2,
  rise: 2,
});

/** Client request time limit: a request unanswered this long counts as failed. */
export const CLIENT_TIMEOUT_MS = 5000;

/** The model every drill node serves. */
export const DRILL_MODEL = "llm-ha/drill-model";

/**
 * The revision every drill node's server reports at start (vLLM's `root`): the fleet's `current`
 * revision, what a rollout starts from. Every node reports the same one, so the model-sameness
 * check and the canaries see one model key (`llm-ha/drill-model@rev-1`), as before without one.
 */
export const DRILL_REVISION = "rev-1";

/**
 * The rollout scenarios' agent settings (every agent may lead, so every agent has them): a step
 * bakes 10 s (production: 5 min), and a node asked to switch that does not serve the new
 * revision and HEALTHY within 60 s fails the load-time gate (production: 30 min; a drill
 * server restarts in 2–5 s, 20 s at worst seen on the loaded 2-core machine).
 */
export const DRILL_ROLLOUT_ENV: Readonly<Record<string, string>> = Object.freeze({
  LLMHA_ROLLOUT_BAKE_MS: "10000",
  LLMHA_ROLLOUT_LOAD_TIMEOUT_MS: "60000",
});

/** How long a rebooted instance of the drill stays down before its processes start again (production: minutes). */
export const DRILL_BOOT_MS = 10_000;

/**
 * The repair scenarios' agent settings: the leader carries its repair plan out through the local
 * cloud's instances (`LLMHA_ACTUATOR=local`, set with the standby AZ), one spare slot in sight
 * per active AZ, and act mode's timings cut to the drill's: a HEALTHY record counts 5 s after the
 * action (the rebooted node's agent is stopped within 2 s of the call), a drain, a reboot and a
 * replacement each fail past a bound that fits a scenario run (production: 10, 30, 60 min).
 */
export const DRILL_REPAIR_ENV: Readonly<Record<string, string>> = Object.freeze({
  LLMHA_REPAIR_MODE: "act",
  LLMHA_REPAIR_SPARE: "az-a=1,az-b=1",
  LLMHA_REPAIR_SETTLE_MS: "5000",
  LLMHA_REPAIR_DRAIN_TIMEOUT_MS: "60000",
  LLMHA_REPAIR_WAIT_TIMEOUT_MS: "90000",
  LLMHA_REPAIR_REPLACEMENT_TIMEOUT_MS: "45000",
});
