import { isIP } from "node:net";
import { hostname } from "node:os";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { maskUserinfo, safeUrl } from "../util/log";
import { parseXidRules, XidRulesError } from "../node/sources/xid-rules";
import { keyFileProblem } from "../node/sources/credential";
import { ACTUATOR_KINDS, AGENT_ROLES, CAPACITY_ENGINE_KINDS, type AgentConfig, GPU_QUERY_MODES, INFERENCE_KINDS, type InferenceKind, LOG_LEVELS, OPTION_SPECS, type OptionSpec, flagOf, groupedSpecs } from "./spec";
import { wrapText } from "../../../contracts/table";
import { RedisAuthError, redisAuthFromEnv } from "../fleet/redis/auth";
import { closest, flagErrorMessage } from "../../../contracts/did-you-mean";
import { ConfigError } from "./error";
import { parseRepairSpare, REPAIR_MODES, REPAIR_PREDICTIVE } from "../fleet/repair/settings";
import { DEEP_CHECK_MODES } from "../node/deep-check";
import { RolloutSettingsError, rolloutSettingsOf } from "../fleet/rollout/settings";
import { findExecutable } from "../node/sources/dcgmi";
import { checkAwsFormats, imdsAvailabilityZone, resolveAwsRegion } from "./aws";
import { checkInventory, checkPracticeWake } from "./checks";
import { checkCapacityEngine } from "./capacity";

export { ConfigError };
export { imdsAvailabilityZone, resolveAwsRegion };

/** Raw values by variable name, from the environment overlaid with `--flags`. */
export function rawSettings(argv: string[], env: NodeJS.ProcessEnv): Map<string, string> {
  const options: Record<string, { type: "string" }> = {};
  for (const s of OPTION_SPECS) options[flagOf(s.env).slice(2)] = { type: "string" };
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: false, strict: true });
  } catch (err) {
    throw new ConfigError("argv", flagErrorMessage(err, Object.keys(options)));
  }
  const raw = new Map<string, string>();
  for (const s of OPTION_SPECS) {
    const e = env[s.env];
    // Set but empty is a mistake (a template that rendered nothing), not "use the default".
    if (e === "") throw new ConfigError(s.env, `is set but empty; unset it to use the default${s.defaultText ? ` (${s.defaultText})` : ""}`);
    if (e !== undefined) raw.set(s.env, e);
    const f = parsed.values[flagOf(s.env).slice(2)];
    if (typeof f === "string") raw.set(s.env, f);
  }
  return raw;
}

function parseValue(spec: OptionSpec, v: string): string | number | boolean | string[] {
  switch (spec.type) {
    case "int": {
      if (!/^\d+$/.test(v.trim())) throw new ConfigError(spec.env, `must be a whole number, got ${JSON.stringify(v)}`);
      const n = Number(v);
      if ((spec.min !== undefined && n < spec.min) || (spec.max !== undefined && n > spec.max)) {
        throw new ConfigError(spec.env, `must be between ${spec.min} and ${spec.max}, got ${n}`);
      }
      return n;
    }
    case "number": {
      const n = Number(v);
      if (v.trim() === "" || !Number.isFinite(n)) throw new ConfigError(spec.env, `must be a number, got ${JSON.stringify(v)}`);
      if ((spec.min !== undefined && n < spec.min) || (spec.max !== undefined && n > spec.max)) throw new ConfigError(spec.env, `must be between ${spec.min} and ${spec.max}, got ${n}`);
      return n;
    }
    case "url": {
      let u: URL;
      try {
        u = new URL(v);
      } catch {
        throw new ConfigError(spec.env, `must be an http(s) URL, got ${JSON.stringify(maskUserinfo(v))}`);
      }
      if (u.protocol !== "http:" && u.protocol !== "https:") throw new ConfigError(spec.env, `must be an http(s) URL, got ${JSON.stringify(safeUrl(v))}`);
      return v.replace(/\/+$/, "");
    }
    case "redisUrl": {
      let u: URL;
      try {
        u = new URL(v);
      } catch {
        // Never echo the value: it may hold the password.
        throw new ConfigError(spec.env, "must be a redis:// or rediss:// URL");
      }
      if (u.protocol !== "redis:" && u.protocol !== "rediss:") throw new ConfigError(spec.env, `must be a redis:// or rediss:// URL, got scheme ${u.protocol}`);
      return v;
    }
    case "kind": {
      if (!(INFERENCE_KINDS as readonly string[]).includes(v)) {
        throw new ConfigError(spec.env, `must be one of ${INFERENCE_KINDS.join(", ")}, got ${JSON.stringify(v)}`);
      }
      return v;
    }
    case "role":
      if (!(AGENT_ROLES as readonly string[]).includes(v)) throw new ConfigError(spec.env, `must be one of ${AGENT_ROLES.join(", ")}, got ${JSON.stringify(v)}`);
      return v;
    case "actuator":
      if (!(ACTUATOR_KINDS as readonly string[]).includes(v)) {
        throw new ConfigError(spec.env, `must be one of ${ACTUATOR_KINDS.join(", ")}, got ${JSON.stringify(v)}`);
      }
      return v;
    case "capacityEngine":
      if (!(CAPACITY_ENGINE_KINDS as readonly string[]).includes(v)) throw new ConfigError(spec.env, `must be one of ${CAPACITY_ENGINE_KINDS.join(", ")}, got ${JSON.stringify(v)}`);
      return v;
    case "repairMode":
      if (!(REPAIR_MODES as readonly string[]).includes(v)) throw new ConfigError(spec.env, `must be one of ${REPAIR_MODES.join(", ")}, got ${JSON.stringify(v)}`);
      return v;
    case "deepCheck":
      if (!(DEEP_CHECK_MODES as readonly string[]).includes(v)) throw new ConfigError(spec.env, `must be one of ${DEEP_CHECK_MODES.join(", ")}, got ${JSON.stringify(v)}`);
      return v;
    case "gpuQuery":
      if (!(GPU_QUERY_MODES as readonly string[]).includes(v)) throw new ConfigError(spec.env, `must be one of ${GPU_QUERY_MODES.join(", ")}, got ${JSON.stringify(v)}`);
      return v;
    case "list": {
      const items = v.split(",").map((x) => x.trim()).filter((x) => x !== "");
      if (items.length === 0) throw new ConfigError(spec.env, "must list at least one value, comma separated");
      return items;
    }
    case "bool":
      if (!["true", "false", "1", "0"].includes(v)) throw new ConfigError(spec.env, `must be true or false, got ${JSON.stringify(v)}`);
      return v === "true" || v === "1";
    case "ip":
      if (isIP(v) === 0) throw new ConfigError(spec.env, `must be an IPv4 or IPv6 address to listen on (0.0.0.0 for all), got ${JSON.stringify(v)}`);
      return v;
    case "logLevel":
      if (!(LOG_LEVELS as readonly string[]).includes(v)) throw new ConfigError(spec.env, `must be one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(v)}`);
      return v;
    case "xidRules":
      try {
        parseXidRules(v);
      } catch (err) {
        if (err instanceof XidRulesError) throw new ConfigError(spec.env, err.message);
        throw err;
      }
      return v;
    case "regex":
      try {
        new RegExp(v);
      } catch (err) {
        throw new ConfigError(spec.env, `is not a valid regular expression: ${(err as Error).message}`);
      }
      return v;
    case "string":
    case "path":
      if (v.trim() === "") throw new ConfigError(spec.env, "must not be empty");
      return v;
  }
}

const DEFAULTS: Omit<AgentConfig, "nodeId" | "az"> = {
  cluster: "default",
  role: "all",
  nvidiaSmi: "nvidia-smi",
  gpuCount: null,
  inferenceUrl: "http://127.0.0.1:8000",
  inferenceKind: "vllm",
  inferenceApiKeyFile: null,
  model: null,
  intervalMs: 1000,
  probeLatencyMs: 5000,
  httpPort: 9400,
  agentCheckPort: 9401,
  redisUrl: null,
  leaseTtlMs: 20_000,
  leaseRenewMs: 7000,
  leaseContendMs: 5000,
  bindAddress: "0.0.0.0",
  fall: 3,
  rise: 2,
  warmupStepMs: 5000,
  degradedWeight: 50,
  gpuTimeoutMs: 5000,
  gpuQuery: "stream",
  modelTimeoutMs: 2000,
  probeTimeoutMs: 30_000,
  probeWindow: 20,
  probeMaxTokens: 1,
  wedgeMs: 500,
  engineIntervalMs: 200,
  engineIdleIntervalMs: 2000,
  metricsUrl: null,
  probeStuckMs: 4000,
  probePrompt: "ping",
  probeExpect: null,
  canaryIntervalMs: 60_000,
  canaryMaxTokens: 16,
  canaryPrefixTokens: 8,
  canaryLogprobTolerance: 0.1,
  modelRevision: null,
  xidLog: null,
  xidRules: null,
  pciDevices: "/sys/bus/pci/devices",
  drainMs: 1500,
  drainFile: null,
  redisCaFile: null,
  redisUser: null,
  redisPasswordFile: null,
  logLevel: "info",
  standbyAz: null,
  standbyHoldMs: 600_000,
  standbyCapacityPercent: 100,
  coldStartGraceMs: 900_000,
  actuator: "none",
  zonalShift: false,
  shiftExpiryMs: 1_800_000,
  awsRegion: null,
  standbyAsgs: null,
  standbyFallback: null,
  capacityEngine: "asg",
  standbyNodepools: null,
  standbyPlaceholder: null,
  standbySchedule: null,
  standbyScheduleTz: "UTC",
  reservedGroups: null,
  standbyWakeBoundMs: 900_000,
  standbyHealthyBoundMs: 600_000,
  standbyWakeBackoffMs: 300_000,
  practiceWake: null,
  practiceWakeTz: "UTC",
  practiceWakeBudgetMs: 1_200_000,
  shiftResources: [],
  azIds: null,
  localCloudUrl: null,
  inventory: "none",
  inventorySelector: "llm-ha.io/gpu-class",
  inventoryTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
  inventoryCaFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
  identityTokenFile: null,
  identityJwks: "none",
  identityIssuer: null,
  repairMode: "advise",
  deepCheck: "auto",
  dcgmi: "dcgmi",
  deepCheckTimeoutMs: 120_000,
  deepCheckRetryMs: 600_000,
  repairSpare: null,
  repairPredictive: "on",
  repairPredictiveBudget: 2,
  repairNamespace: "llm-ha",
  repairSettleMs: 30_000,
  repairDrainTimeoutMs: 600_000,
  repairWaitTimeoutMs: 1_800_000,
  repairReplacementTimeoutMs: 3_600_000,
  rolloutNamespace: "llm-ha",
  rolloutBakeMs: 300_000,
  rolloutLatencyTolerance: 0.2,
  rolloutErrorTolerance: 0.01,
  rolloutLoadTimeoutMs: 1_800_000,
  rolloutLoadRatio: 3,
};

/** Frozen defaults, for `--help` and tests. */
export const CONFIG_DEFAULTS: Readonly<typeof DEFAULTS> = Object.freeze({ ...DEFAULTS });

const CLUSTER_RE = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * `LLMHA_*` variables in the environment that no setting reads (a typo such as
 * `LLMHA_INTERVALMS` would otherwise be ignored in silence), each with the closest real
 * name when one is near. `llm-ha agent` warns about them at start.
 */
export function unknownSettings(env: NodeJS.ProcessEnv): { name: string; suggestion: string | null }[] {
  const known = OPTION_SPECS.map((s) => s.env);
  return Object.keys(env)
    .filter((n) => n.startsWith("LLMHA_") && !known.includes(n))
    .sort()
    .map((name) => ({ name, suggestion: closest(name, known) }));
}

/**
 * Parses and validates the whole configuration once. `az` may be resolved later from
 * EC2 IMDSv2 (see `resolveAz`); everything else is final here.
 */
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv): Omit<AgentConfig, "az"> & { az: string | null } {
  const raw = rawSettings(argv, env);
  const out: Record<string, unknown> = { ...DEFAULTS, nodeId: hostname(), az: null };
  for (const spec of OPTION_SPECS) {
    const v = raw.get(spec.env);
    if (v !== undefined) out[spec.key] = parseValue(spec, v);
  }
  const cfg = out as Omit<AgentConfig, "az"> & { az: string | null };
  if (!CLUSTER_RE.test(cfg.cluster)) throw new ConfigError("LLMHA_CLUSTER", "must be 1-64 letters, digits, '.', '_' or '-'");
  if (!CLUSTER_RE.test(cfg.nodeId)) throw new ConfigError("LLMHA_NODE_ID", "must be 1-64 letters, digits, '.', '_' or '-'");
  if (cfg.az !== null && !CLUSTER_RE.test(cfg.az)) throw new ConfigError("LLMHA_AZ", "must be 1-64 letters, digits, '.', '_' or '-'");
  if (cfg.httpPort === cfg.agentCheckPort) throw new ConfigError("LLMHA_AGENT_CHECK_PORT", `must differ from LLMHA_HTTP_PORT (${cfg.httpPort})`);
  if (cfg.leaseRenewMs >= cfg.leaseTtlMs) throw new ConfigError("LLMHA_LEASE_RENEW_MS", `must be below LLMHA_LEASE_TTL_MS (${cfg.leaseTtlMs})`);
  if (cfg.probeTimeoutMs < cfg.probeLatencyMs) throw new ConfigError("LLMHA_PROBE_TIMEOUT_MS", `must be at least LLMHA_PROBE_LATENCY_MS (${cfg.probeLatencyMs})`);
  checkActuation(cfg);
  if (cfg.deepCheck === "dcgmi" && cfg.role !== "controller" && findExecutable(cfg.dcgmi, env.PATH ?? "") === null) {
    throw new ConfigError("LLMHA_DCGMI", `${JSON.stringify(cfg.dcgmi)} is not found or not executable${cfg.dcgmi.includes("/") ? "" : " on PATH"}, and LLMHA_DEEP_CHECK=dcgmi requires it (auto uses it only where present)`);
  }
  try {
    parseRepairSpare(cfg.repairSpare);
  } catch (err) {
    throw new ConfigError("LLMHA_REPAIR_SPARE", (err as Error).message);
  }
  try {
    rolloutSettingsOf(cfg);
  } catch (err) {
    if (err instanceof RolloutSettingsError) throw new ConfigError(err.variable, err.message.slice(err.variable.length + 1));
    throw err;
  }
  if (!(REPAIR_PREDICTIVE as readonly string[]).includes(cfg.repairPredictive)) throw new ConfigError("LLMHA_REPAIR_PREDICTIVE", `must be on or off, got ${JSON.stringify(cfg.repairPredictive.slice(0, 40))}`);
  if (cfg.identityJwks !== "none") {
    if (cfg.identityJwks !== "kubernetes" && !/^https?:\/\/./.test(cfg.identityJwks)) throw new ConfigError("LLMHA_IDENTITY_JWKS", `must be none, kubernetes or an http(s) URL, got ${JSON.stringify(safeUrl(cfg.identityJwks))}`);
    if (cfg.inventory === "none") throw new ConfigError("LLMHA_IDENTITY_JWKS", "needs LLMHA_INVENTORY: an enrolment is checked against the inventory's nodes");
  }
  if (cfg.inventory === "kubernetes" && cfg.role !== "node" && !env.KUBERNETES_SERVICE_HOST) {
    throw new ConfigError("LLMHA_INVENTORY", "kubernetes needs KUBERNETES_SERVICE_HOST (set in every pod): outside a cluster give the API's URL");
  }
  if (cfg.inferenceApiKeyFile) {
    const problem = keyFileProblem(cfg.inferenceApiKeyFile);
    if (problem) throw new ConfigError("LLMHA_INFERENCE_API_KEY_FILE", problem);
  }
  try {
    redisAuthFromEnv({ LLMHA_REDIS_USER: cfg.redisUser ?? undefined, LLMHA_REDIS_PASSWORD_FILE: cfg.redisPasswordFile ?? undefined });
  } catch (err) {
    if (err instanceof RedisAuthError) throw new ConfigError(err.variable, err.message.slice(err.variable.length + 1));
    throw err;
  }
  if (cfg.redisCaFile) {
    try {
      readFileSync(cfg.redisCaFile);
    } catch (err) {
      throw new ConfigError("LLMHA_REDIS_CA_FILE", `cannot be read: ${(err as Error).message}`);
    }
  }
  return cfg;
}

/**
 * The actuator settings that only make sense together. Only the leader acts, so any actuator
 * needs Redis; `aws` needs something to act on; `local` needs the drill's endpoint.
 */
/** `act` needs something to act through: an actuator (dry-run and local: logged only), and for `aws` the Kubernetes API the inventory reads. */
function checkRepairAct(cfg: Omit<AgentConfig, "az"> & { az: string | null }): void {
  if (cfg.repairMode !== "act" || cfg.role === "node") return;
  if (cfg.actuator === "none") throw new ConfigError("LLMHA_REPAIR_MODE", "act needs LLMHA_ACTUATOR aws (Kubernetes and EC2), local (the drill's simulated instances) or dry-run (logs the repair steps, calls nothing); with none use advise");
  if (cfg.actuator === "aws" && cfg.inventory === "none") throw new ConfigError("LLMHA_REPAIR_MODE", "act with LLMHA_ACTUATOR=aws needs LLMHA_INVENTORY (kubernetes): cordon, drain and restart go through the Kubernetes API, a reboot to the node's instance id");
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(cfg.repairNamespace)) throw new ConfigError("LLMHA_REPAIR_NAMESPACE", "must be a Kubernetes namespace name");
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(cfg.rolloutNamespace)) throw new ConfigError("LLMHA_ROLLOUT_NAMESPACE", "must be a Kubernetes namespace name");
}

function checkActuation(cfg: Omit<AgentConfig, "az"> & { az: string | null }): void {
  if (cfg.standbyAz !== null && !CLUSTER_RE.test(cfg.standbyAz)) throw new ConfigError("LLMHA_STANDBY_AZ", "must be 1-64 letters, digits, '.', '_' or '-'");
  checkPracticeWake(cfg);
  if (cfg.role === "controller" && !cfg.redisUrl) throw new ConfigError("LLMHA_REDIS_URL", "is required with LLMHA_ROLE=controller: the lease and the registry live in Redis");
  if (cfg.role === "node" && cfg.actuator !== "none") throw new ConfigError("LLMHA_ACTUATOR", `must be none with LLMHA_ROLE=node (got ${cfg.actuator}): node agents hold no cloud credential; the controller acts (LLMHA_ROLE=controller)`);
  checkInventory(cfg.inventory);
  checkRepairAct(cfg);
  checkCapacityEngine(cfg);
  if (cfg.actuator === "none") return;
  if (!cfg.redisUrl) throw new ConfigError("LLMHA_ACTUATOR", `${cfg.actuator} needs LLMHA_REDIS_URL: only the elected leader acts`);
  // The repair ladder acting through AWS (reboots, with cordon and drain through Kubernetes) is a job of its own.
  const repairs = cfg.actuator === "aws" && cfg.repairMode === "act";
  if (!cfg.standbyAz && !cfg.zonalShift && !(cfg.actuator === "aws" && cfg.reservedGroups) && !repairs) {
    throw new ConfigError("LLMHA_STANDBY_AZ", `LLMHA_ACTUATOR=${cfg.actuator} has nothing to do: set LLMHA_STANDBY_AZ or LLMHA_ZONAL_SHIFT=true${cfg.actuator === "aws" ? " (or LLMHA_RESERVED_GROUPS, or LLMHA_REPAIR_MODE=act)" : ""}`);
  }
  if (cfg.actuator === "local" && !cfg.localCloudUrl) throw new ConfigError("LLMHA_LOCAL_CLOUD_URL", "is required with LLMHA_ACTUATOR=local");
  if (cfg.actuator !== "aws") return;
  if (!cfg.standbyAsgs && !cfg.standbyNodepools && cfg.shiftResources.length === 0 && !cfg.reservedGroups && !repairs) {
    throw new ConfigError("LLMHA_STANDBY_ASGS", "LLMHA_ACTUATOR=aws needs the standby Auto Scaling groups (LLMHA_STANDBY_ASGS), load balancers to shift (LLMHA_SHIFT_RESOURCES), reserved groups to size (LLMHA_RESERVED_GROUPS) or the repair ladder acting (LLMHA_REPAIR_MODE=act)");
  }
  if (cfg.standbyAsgs && !cfg.standbyAz) throw new ConfigError("LLMHA_STANDBY_AZ", "is required with LLMHA_STANDBY_ASGS (which AZ the groups are in)");
  if (cfg.zonalShift && cfg.shiftResources.length === 0) throw new ConfigError("LLMHA_SHIFT_RESOURCES", "is required with LLMHA_ACTUATOR=aws and LLMHA_ZONAL_SHIFT=true");
  if (cfg.zonalShift && !cfg.azIds) throw new ConfigError("LLMHA_AZ_IDS", "is required with LLMHA_ZONAL_SHIFT=true (ARC names zones by AZ id)");
}

/** The full configuration, with `LLMHA_AZ` resolved from IMDSv2 when unset. */
export async function loadConfig(argv: string[], env: NodeJS.ProcessEnv, imds: () => Promise<string | null> = imdsAvailabilityZone): Promise<AgentConfig> {
  const cfg = parseConfig(argv, env);
  // The controller checks no node: its AZ only labels its series (no IMDS call from a pod).
  const az = cfg.az ?? (cfg.role === "controller" ? "controller" : await imds());
  if (!az) throw new ConfigError("LLMHA_AZ", "is required: not set, and no EC2 instance metadata to read the placement from");
  const full: AgentConfig = { ...cfg, az };
  if (full.actuator === "aws") {
    full.awsRegion = resolveAwsRegion(full, env);
    await checkAwsFormats(full);
  }
  return full;
}

/**
 * \`--help\` text: every option with its variable and default, from the spec table, grouped by
 * concern; the descriptions wrapped to \`width\` columns.
 */
export function helpText(width = 100): string {
  const lines = ["Usage: llm-ha agent [--flag value ...]", "", "Every flag is also an environment variable (flags win); see docs/settings.md"];
  for (const g of groupedSpecs()) {
    lines.push("", g.title);
    for (const s of g.specs) lines.push(`  ${flagOf(s.env)} / ${s.env}`, ...wrapText(`      ${s.description.replace(/`/g, "")} (default: ${s.defaultText})`, width, "      "));
  }
  return lines.join("\n") + "\n";
}

export type { AgentConfig, InferenceKind };
