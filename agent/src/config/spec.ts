/**
 * Every setting of `llm-ha agent`: its environment variable, its `--flag`, its default and
 * what it means. This table is the single source for parsing, `--help` and the settings
 * page docs/settings.md (a test checks the page against it). Contract: docs/design.md.
 */

export const INFERENCE_KINDS = ["vllm", "tgi", "triton", "llamacpp", "openai"] as const;
export type InferenceKind = (typeof INFERENCE_KINDS)[number];

/**
 * How the agent reads nvidia-smi (`LLMHA_GPU_QUERY`): `stream`, one long-lived `nvidia-smi … -lms`
 * child printing a batch each period (falling back to `per-tick` by itself where nvidia-smi refuses
 * `-lms`); `per-tick`, one nvidia-smi process per period.
 */
export const GPU_QUERY_MODES = ["stream", "per-tick"] as const;
export type GpuQueryMode = (typeof GPU_QUERY_MODES)[number];

/** How the leader acts beyond Redis (`LLMHA_ACTUATOR`). */
export const ACTUATOR_KINDS = ["none", "dry-run", "aws", "local"] as const;
export type ActuatorKind = (typeof ACTUATOR_KINDS)[number];

/**
 * What one `llm-ha agent` process does (`LLMHA_ROLE`): `all` checks its node and contends for
 * the lease (the old way, every agent a possible leader); `node` checks its node and never
 * contends nor acts (GPU nodes: no cloud credential); `controller` checks no node, contends,
 * and alone acts (the controller Deployment on the system nodes).
 */
export const AGENT_ROLES = ["all", "node", "controller"] as const;
export type AgentRole = (typeof AGENT_ROLES)[number];

/** What gives the standby AZ its capacity (`LLMHA_CAPACITY_ENGINE`). */
export const CAPACITY_ENGINE_KINDS = ["asg", "karpenter"] as const;
export type CapacityEngineKind = (typeof CAPACITY_ENGINE_KINDS)[number];

export type OptionType = "capacityEngine" | "deepCheck" | "gpuQuery" | "repairMode" | "string" | "int" | "url" | "kind" | "actuator" | "role" | "path" | "bool" | "redisUrl" | "list" | "ip" | "logLevel" | "xidRules" | "regex" | "number";

/** pino levels `LLMHA_LOG_LEVEL` takes. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

export interface OptionSpec {
  /** Key in `AgentConfig`. */
  readonly key: keyof AgentConfig;
  readonly env: string;
  readonly type: OptionType;
  /** Shown in `--help` and docs/settings.md; `undefined` means no default. */
  readonly defaultText: string;
  readonly description: string;
  /** Inclusive bounds for `int`. */
  readonly min?: number;
  readonly max?: number;
  /** Part of the external contract (docs/design.md) (tests outside the project drive it). */
  readonly contract?: boolean;
}

export interface AgentConfig {
  nodeId: string;
  az: string;
  cluster: string;
  role: AgentRole;
  nvidiaSmi: string;
  gpuCount: number | null;
  inferenceUrl: string;
  inferenceKind: InferenceKind;
  inferenceApiKeyFile: string | null;
  model: string | null;
  intervalMs: number;
  probeLatencyMs: number;
  httpPort: number;
  agentCheckPort: number;
  redisUrl: string | null;
  leaseTtlMs: number;
  leaseRenewMs: number;
  leaseContendMs: number;
  bindAddress: string;
  fall: number;
  rise: number;
  warmupStepMs: number;
  degradedWeight: number;
  gpuTimeoutMs: number;
  gpuQuery: GpuQueryMode;
  modelTimeoutMs: number;
  probeTimeoutMs: number;
  probeWindow: number;
  probeMaxTokens: number;
  wedgeMs: number;
  engineIntervalMs: number;
  engineIdleIntervalMs: number;
  metricsUrl: string | null;
  probeStuckMs: number;
  probePrompt: string;
  probeExpect: string | null;
  modelRevision: string | null;
  xidLog: string | null;
  xidRules: string | null;
  pciDevices: string | null;
  drainMs: number;
  drainFile: string | null;
  redisCaFile: string | null;
  redisUser: string | null;
  redisPasswordFile: string | null;
  logLevel: string;
  standbyAz: string | null;
  standbyHoldMs: number;
  standbyCapacityPercent: number;
  coldStartGraceMs: number;
  actuator: ActuatorKind;
  zonalShift: boolean;
  shiftExpiryMs: number;
  awsRegion: string | null;
  standbyAsgs: string | null;
  standbyFallback: string | null;
  capacityEngine: CapacityEngineKind;
  standbyNodepools: string | null;
  standbyPlaceholder: string | null;
  standbySchedule: string | null;
  standbyScheduleTz: string;
  reservedGroups: string | null;
  standbyWakeBoundMs: number;
  standbyHealthyBoundMs: number;
  standbyWakeBackoffMs: number;
  practiceWake: string | null;
  practiceWakeTz: string;
  practiceWakeBudgetMs: number;
  shiftResources: string[];
  azIds: string | null;
  localCloudUrl: string | null;
  inventory: string;
  inventorySelector: string;
  inventoryTokenFile: string;
  inventoryCaFile: string;
  identityTokenFile: string | null;
  identityJwks: string;
  identityIssuer: string | null;
  canaryIntervalMs: number;
  canaryMaxTokens: number;
  canaryPrefixTokens: number;
  canaryLogprobTolerance: number;
  repairMode: "off" | "advise" | "act";
  deepCheck: "auto" | "dcgmi" | "smoke" | "off";
  dcgmi: string;
  deepCheckTimeoutMs: number;
  deepCheckRetryMs: number;
  repairSpare: string | null;
  repairPredictive: string;
  repairPredictiveBudget: number;
  repairNamespace: string;
  repairSettleMs: number;
  repairDrainTimeoutMs: number;
  repairWaitTimeoutMs: number;
  repairReplacementTimeoutMs: number;
  rolloutNamespace: string;
  rolloutBakeMs: number;
  rolloutLatencyTolerance: number;
  rolloutErrorTolerance: number;
  rolloutLoadTimeoutMs: number;
  rolloutLoadRatio: number;
}

const ms = (v: number): string => `${v}`;

export const OPTION_SPECS: readonly OptionSpec[] = [
  { key: "nodeId", env: "LLMHA_NODE_ID", type: "string", defaultText: "hostname", description: "node identity", contract: true },
  { key: "az", env: "LLMHA_AZ", type: "string", defaultText: "EC2 IMDSv2 placement, else required", description: "availability zone", contract: true },
  { key: "cluster", env: "LLMHA_CLUSTER", type: "string", defaultText: "default", description: "cluster/environment name; Redis key namespace", contract: true },
  { key: "nvidiaSmi", env: "LLMHA_NVIDIA_SMI", type: "path", defaultText: "nvidia-smi", description: "path of nvidia-smi", contract: true },
  { key: "gpuCount", env: "LLMHA_GPU_COUNT", type: "int", min: 1, max: 64, defaultText: "none", description: "expected GPUs on the node; fewer is a hard fault", contract: true },
  { key: "inferenceUrl", env: "LLMHA_INFERENCE_URL", type: "url", defaultText: "http://127.0.0.1:8000", description: "inference server base URL", contract: true },
  { key: "inferenceKind", env: "LLMHA_INFERENCE_KIND", type: "kind", defaultText: "vllm", description: "`vllm`, `tgi`, `triton`, `llamacpp`, `openai`", contract: true },
  { key: "inferenceApiKeyFile", env: "LLMHA_INFERENCE_API_KEY_FILE", type: "path", defaultText: "none", description: "file holding the inference server's API key (vLLM `--api-key` / `VLLM_API_KEY`): sent as `Authorization: Bearer` on the model check, the probe and the engine metrics; re-read when the file changes; never logged or shown. Without it, a user part in `LLMHA_INFERENCE_URL` is sent as Basic credentials (and never shown)" },
  { key: "model", env: "LLMHA_MODEL", type: "string", defaultText: "none", description: "model id that must be served", contract: true },
  { key: "intervalMs", env: "LLMHA_INTERVAL_MS", type: "int", min: 100, max: 600_000, defaultText: ms(1000), description: "check period", contract: true },
  { key: "probeLatencyMs", env: "LLMHA_PROBE_LATENCY_MS", type: "int", min: 10, max: 600_000, defaultText: ms(5000), description: "probe latency above which the node is DEGRADED", contract: true },
  { key: "httpPort", env: "LLMHA_HTTP_PORT", type: "int", min: 1, max: 65535, defaultText: "9400", description: "HTTP reporter", contract: true },
  { key: "agentCheckPort", env: "LLMHA_AGENT_CHECK_PORT", type: "int", min: 1, max: 65535, defaultText: "9401", description: "HAProxy agent-check", contract: true },
  { key: "redisUrl", env: "LLMHA_REDIS_URL", type: "redisUrl", defaultText: "none", description: "registry + election; without it the agent runs standalone (`redis://` or `rediss://` for TLS, password in the URL)", contract: true },
  { key: "leaseTtlMs", env: "LLMHA_LEASE_TTL_MS", type: "int", min: 500, max: 600_000, defaultText: ms(20_000), description: "leader lease time to live", contract: true },
  { key: "leaseRenewMs", env: "LLMHA_LEASE_RENEW_MS", type: "int", min: 100, max: 600_000, defaultText: ms(7000), description: "renew period, about a third of the TTL", contract: true },
  { key: "leaseContendMs", env: "LLMHA_LEASE_CONTEND_MS", type: "int", min: 100, max: 600_000, defaultText: ms(5000), description: "how often a non-leader tries to acquire", contract: true },
  { key: "role", env: "LLMHA_ROLE", type: "role", defaultText: "all", description: "`all`: check this node and contend for the leader lease (every agent a possible leader); `node`: check this node, never contend or act (GPU nodes hold no cloud credential; Redis user `llmha-agent`); `controller`: no node checks, contend and act (the controller Deployment; Redis user `llmha-controller`)" },
  { key: "bindAddress", env: "LLMHA_BIND_ADDRESS", type: "ip", defaultText: "0.0.0.0", description: "address the HTTP and agent-check ports listen on" },
  { key: "fall", env: "LLMHA_FALL", type: "int", min: 1, max: 100, defaultText: "3", description: "consecutive soft-fault results before acting" },
  { key: "rise", env: "LLMHA_RISE", type: "int", min: 1, max: 100, defaultText: "2", description: "consecutive clean results before the warmup ramp starts" },
  { key: "warmupStepMs", env: "LLMHA_WARMUP_STEP_MS", type: "int", min: 0, max: 3_600_000, defaultText: ms(5000), description: "length of each warmup step (25 → 50 → 75 → 100 %); 0 skips the ramp" },
  { key: "degradedWeight", env: "LLMHA_DEGRADED_WEIGHT", type: "int", min: 1, max: 100, defaultText: "50", description: "weight share (%) of a DEGRADED node" },
  { key: "gpuTimeoutMs", env: "LLMHA_GPU_TIMEOUT_MS", type: "int", min: 50, max: 600_000, defaultText: ms(5000), description: "nvidia-smi time limit (it can hang in D state): a one-shot query that has not answered, or a stream's batch this late" },
  { key: "gpuQuery", env: "LLMHA_GPU_QUERY", type: "gpuQuery", defaultText: "`stream`", description: "how nvidia-smi is read: `stream` keeps one `nvidia-smi --query-gpu=… -lms <LLMHA_INTERVAL_MS>` running and reads its batch of GPU rows each period (where nvidia-smi refuses `-lms` the agent logs it and goes on per tick by itself); `per-tick` starts one nvidia-smi per period (the agent's way before the stream; it costs a process a period)" },
  { key: "modelTimeoutMs", env: "LLMHA_MODEL_TIMEOUT_MS", type: "int", min: 50, max: 600_000, defaultText: ms(2000), description: "time limit of readiness and metrics requests" },
  { key: "probeTimeoutMs", env: "LLMHA_PROBE_TIMEOUT_MS", type: "int", min: 50, max: 600_000, defaultText: ms(30_000), description: "probe completion time limit" },
  { key: "probeWindow", env: "LLMHA_PROBE_WINDOW", type: "int", min: 1, max: 1000, defaultText: "20", description: "probe latencies kept for p50/p95" },
  { key: "probeMaxTokens", env: "LLMHA_PROBE_MAX_TOKENS", type: "int", min: 1, max: 4, defaultText: "1", description: "tokens the probe asks for" },
  { key: "wedgeMs", env: "LLMHA_WEDGE_MS", type: "int", min: 100, max: 600_000, defaultText: ms(500), description: "requests waiting in the engine while its progress counters (tokens, forward passes) stand still this long: engine wedged (needs engine metrics)" },
  { key: "engineIntervalMs", env: "LLMHA_ENGINE_INTERVAL_MS", type: "int", min: 50, max: 600_000, defaultText: ms(200), description: "how often the engine's Prometheus metrics (queue and progress counters) are read while the engine serves others than the agent's probe (requests waiting or several running, counters moving beyond the probes') or has held the probe for 100 ms: the wedge check's sampling" },
  { key: "engineIdleIntervalMs", env: "LLMHA_ENGINE_IDLE_INTERVAL_MS", type: "int", min: 50, max: 600_000, defaultText: ms(2000), description: "how often they are read while the engine serves nobody but the agent's probe (never more often than `LLMHA_ENGINE_INTERVAL_MS`); the first read that finds other work switches to that period" },
  { key: "metricsUrl", env: "LLMHA_METRICS_URL", type: "url", defaultText: "the kind's own: `<inference URL>/metrics`; Triton port 8002; `openai` none", description: "the inference server's Prometheus metrics (vLLM, TGI, Triton, llama.cpp `--metrics`, SGLang series are read)" },
  { key: "probeStuckMs", env: "LLMHA_PROBE_STUCK_MS", type: "int", min: 100, max: 600_000, defaultText: ms(4000), description: "a probe unanswered this long while no engine metrics show tokens flowing is a hard fault (`PROBE_STUCK`)" },
  { key: "probePrompt", env: "LLMHA_PROBE_PROMPT", type: "string", defaultText: "ping", description: "prompt the probe sends (greedy, `LLMHA_PROBE_MAX_TOKENS` tokens)" },
  { key: "probeExpect", env: "LLMHA_PROBE_EXPECT", type: "regex", defaultText: "none", description: "regular expression the probe's answer must match (e.g. prompt `The capital of France is`, expect `Paris`); catches a model that loads but answers garbage (corrupted weights)" },
  { key: "modelRevision", env: "LLMHA_MODEL_REVISION", type: "string", defaultText: "none", description: "revision or weights hash the server must report (TGI `model_sha`, vLLM `root`, Triton version); another one is `MODEL_MISMATCH`" },
  { key: "xidLog", env: "LLMHA_XID_LOG", type: "path", defaultText: "none", description: "kernel log to scan for `NVRM: Xid` lines (e.g. /dev/kmsg); none turns XID checks off" },
  { key: "xidRules", env: "LLMHA_XID_RULES", type: "xidRules", defaultText: "built-in table", description: "overrides of the XID table, comma separated `code=fatal`, `code=app`, `code=ignore` or `code=K/WINDOW` (K in WINDOW, e.g. `94=3/10m`)" },
  { key: "pciDevices", env: "LLMHA_PCI_DEVICES", type: "path", defaultText: "/sys/bus/pci/devices", description: "sysfs PCI device folder: NVIDIA GPUs listed there are compared with nvidia-smi and `LLMHA_GPU_COUNT`" },
  { key: "drainMs", env: "LLMHA_DRAIN_MS", type: "int", min: 0, max: 600_000, defaultText: ms(1500), description: "on SIGTERM, how long to answer `drain` / 503 before stopping" },
  { key: "drainFile", env: "LLMHA_DRAIN_FILE", type: "string", defaultText: "none", description: "a file whose presence is a planned drain (`PLANNED_DRAIN`: `drain` / 503 while it exists, serving again once it is gone); the inference pod's preStop hook writes it (`/run/llm-ha/drain` in the shipped manifests)" },
  { key: "redisCaFile", env: "LLMHA_REDIS_CA_FILE", type: "path", defaultText: "none", description: "CA bundle for `rediss://` (system CAs otherwise)" },
  { key: "redisUser", env: "LLMHA_REDIS_USER", type: "string", defaultText: "the URL's user, else `default`", description: "Redis ACL user (`llmha-agent` with `LLMHA_ROLE=node`, `llmha-controller` with `controller`, `llmha-agent-leader` with `all`; see docs/redis-roles.md)" },
  { key: "redisPasswordFile", env: "LLMHA_REDIS_PASSWORD_FILE", type: "path", defaultText: "the URL's password", description: "file holding the Redis user's password (a mounted secret): never on the command line" },
  { key: "logLevel", env: "LLMHA_LOG_LEVEL", type: "logLevel", defaultText: "info", description: "pino level: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`" },
  { key: "standbyAz", env: "LLMHA_STANDBY_AZ", type: "string", defaultText: "none", description: "the AZ kept scaled to zero that the leader wakes when an active AZ degrades; while not wanted awake its nodes do not count toward the tier" },
  { key: "standbyHoldMs", env: "LLMHA_STANDBY_HOLD_MS", type: "int", min: 0, max: 86_400_000, defaultText: ms(600_000), description: "keep the standby AZ awake this long after the active AZs are OK again, then hand it back to its schedule" },
  { key: "standbyCapacityPercent", env: "LLMHA_STANDBY_CAPACITY_PERCENT", type: "int", min: 1, max: 100, defaultText: "100", description: "the standby AZ's size as a percentage of an active AZ (partial redundancy): while it is woken and the GPUs lost exceed that share, the tier reason says it covers only part of them" },
  { key: "coldStartGraceMs", env: "LLMHA_COLD_START_GRACE_MS", type: "int", min: 0, max: 86_400_000, defaultText: ms(900_000), description: "an AZ never yet OK (nodes still loading their model) wakes the standby only after this long: a cold start is not a capacity loss" },
  { key: "actuator", env: "LLMHA_ACTUATOR", type: "actuator", defaultText: "none", description: "how the leader acts: `none` (publish desired state only), `dry-run` (log and record, no calls), `aws` (Auto Scaling, ARC zonal shift), `local` (the drill's local cloud)" },
  { key: "zonalShift", env: "LLMHA_ZONAL_SHIFT", type: "bool", defaultText: "false", description: "shift load-balancer traffic away from a DOWN AZ while another active AZ is OK (one AZ at a time)" },
  { key: "shiftExpiryMs", env: "LLMHA_SHIFT_EXPIRY_MS", type: "int", min: 10_000, max: 259_200_000, defaultText: ms(1_800_000), description: "a zonal shift ends by itself after this long unless the leader renews it" },
  { key: "awsRegion", env: "LLMHA_AWS_REGION", type: "string", defaultText: "`AWS_REGION`, else from `LLMHA_AZ`", description: "`aws`: region of the Auto Scaling groups and load balancers" },
  { key: "standbyAsgs", env: "LLMHA_STANDBY_ASGS", type: "string", defaultText: "none", description: "`aws`: the standby AZ's Auto Scaling groups and the size to wake each to, `asg=wakeSize,…`" },
  { key: "standbyFallback", env: "LLMHA_STANDBY_FALLBACK", type: "string", defaultText: "none", description: "`aws`: groups woken one at a time, in order, when the standby groups cannot launch (capacity, quota, reservation or launch template): another instance type in the standby AZ, then another AZ's spare group, `asg=wakeSize,…`" },
  { key: "capacityEngine", env: "LLMHA_CAPACITY_ENGINE", type: "capacityEngine", defaultText: "asg", description: "what gives the standby AZ its capacity, whatever `LLMHA_ACTUATOR` (`aws` or `local`) acts with for shifts: `asg` (Auto Scaling group sizes, `LLMHA_STANDBY_ASGS`) or `karpenter` (NodePool GPU limits and a placeholder workload through the Kubernetes API at `LLMHA_INVENTORY`, `LLMHA_STANDBY_NODEPOOLS`)" },
  { key: "standbyNodepools", env: "LLMHA_STANDBY_NODEPOOLS", type: "string", defaultText: "none", description: "`karpenter`: the standby AZ's NodePools in fallback order and the GPU limit each gets while woken, `nodepool=gpus,…` (asleep every limit is 0); the next pool is raised when one cannot launch (NodeClaims `Launched` False, or none in service within the wake bound). Required with `LLMHA_STANDBY_AZ`" },
  { key: "standbyPlaceholder", env: "LLMHA_STANDBY_PLACEHOLDER", type: "string", defaultText: "none", description: "`karpenter`: the placeholder Deployment of GPU-requesting pause pods pinned to the standby AZ, `namespace/deployment=replicas`: the wake scales it to `replicas` (its pending pods make Karpenter provision), the release to 0" },
  { key: "standbySchedule", env: "LLMHA_STANDBY_SCHEDULE", type: "string", defaultText: "none", description: "`karpenter`: the standby's scale-to-zero schedule, which the leader runs itself (Karpenter has no scheduled scaling), `scaleDown;scaleUp[;weekendDown]` 5-field crons: woken at `scaleUp`, parked at the others, never parked while an incident or the hold wants it awake" },
  { key: "standbyScheduleTz", env: "LLMHA_STANDBY_SCHEDULE_TZ", type: "string", defaultText: "UTC", description: "IANA time zone of `LLMHA_STANDBY_SCHEDULE`" },
  { key: "reservedGroups", env: "LLMHA_RESERVED_GROUPS", type: "string", defaultText: "none", description: "`aws`: GPU groups created at zero on a capacity reservation or Capacity Block, `asg=cr-id:size,…`: the leader sizes each once its reservation is active (to what it holds free, up to `size`), and brings it to zero when the reservation ends" },
  { key: "standbyWakeBoundMs", env: "LLMHA_STANDBY_WAKE_BOUND_MS", type: "int", min: 10_000, max: 86_400_000, defaultText: ms(900_000), description: "a woken standby step with no instance in service this long has failed: the next fallback is woken" },
  { key: "standbyHealthyBoundMs", env: "LLMHA_STANDBY_HEALTHY_BOUND_MS", type: "int", min: 1000, max: 86_400_000, defaultText: ms(600_000), description: "a woken standby step whose instances are in service but whose nodes are not HEALTHY this long after its wake (booted onto bad GPUs) has failed (`unhealthy`): the next fallback is woken, and a later wake backs off" },
  { key: "standbyWakeBackoffMs", env: "LLMHA_STANDBY_WAKE_BACKOFF_MS", type: "int", min: 1000, max: 3_600_000, defaultText: ms(300_000), description: "a wake released with no healthy standby node ever seen (its nodes booted onto bad GPUs, or every step failed) makes the next wake wait this long, doubling per such wake up to 12 times this (1 h by default); a wake that reaches a healthy node resets it" },
  { key: "practiceWake", env: "LLMHA_PRACTICE_WAKE", type: "string", defaultText: "none", description: "cron (5 fields) on which the leader wakes the standby at zero, times the first standby node serving, records the outcome and releases it (skipped above L0 or when the standby is awake), e.g. `0 4 * * 2`" },
  { key: "practiceWakeTz", env: "LLMHA_PRACTICE_WAKE_TZ", type: "string", defaultText: "UTC", description: "IANA time zone of `LLMHA_PRACTICE_WAKE`" },
  { key: "practiceWakeBudgetMs", env: "LLMHA_PRACTICE_WAKE_BUDGET_MS", type: "int", min: 60_000, max: 86_400_000, defaultText: ms(1_200_000), description: "a practice wake with no standby node serving this long has failed, and is released" },
  { key: "shiftResources", env: "LLMHA_SHIFT_RESOURCES", type: "list", defaultText: "none", description: "`aws`: ARNs of the load balancers to zonal-shift, comma separated" },
  { key: "azIds", env: "LLMHA_AZ_IDS", type: "string", defaultText: "none", description: "`aws`: AZ name to AZ id (ARC names zones by id), `us-east-1a=use1-az1,…`" },
  { key: "localCloudUrl", env: "LLMHA_LOCAL_CLOUD_URL", type: "url", defaultText: "none", description: "`local`: the drill's local cloud (starts and stops the standby nodes, shifts in HAProxy)" },
  { key: "inventory", env: "LLMHA_INVENTORY", type: "string", defaultText: "none", description: "where the leader learns which GPU nodes exist and in which AZ: `kubernetes` (the cluster's Node objects, read with the pod's ServiceAccount; the controller's manifests set it), an http(s) URL of an API serving `/api/v1/nodes` the same way (the drill's local cloud), or `none` (trust what agents write in Redis: one node's Redis credentials can then steer the leader)" },
  { key: "inventorySelector", env: "LLMHA_INVENTORY_SELECTOR", type: "string", defaultText: "`llm-ha.io/gpu-class`", description: "label selector of the GPU Nodes that are inventory (the label the stack sets on its GPU nodes)" },
  { key: "inventoryTokenFile", env: "LLMHA_INVENTORY_TOKEN_FILE", type: "path", defaultText: "`/var/run/secrets/kubernetes.io/serviceaccount/token`", description: "bearer token for the inventory API (https only), re-read on every list (kubelet rotates it)" },
  { key: "inventoryCaFile", env: "LLMHA_INVENTORY_CA_FILE", type: "path", defaultText: "`/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`", description: "CA bundle of the inventory API (https only)" },
  { key: "identityTokenFile", env: "LLMHA_IDENTITY_TOKEN_FILE", type: "path", defaultText: "none", description: "the node's projected ServiceAccount token (audience `llm-ha`; it names the node): the agent enrols with it and heartbeats only under a record key the leader hands it (node identities; the leader needs `LLMHA_IDENTITY_JWKS`). Re-read at every enrolment" },
  { key: "identityJwks", env: "LLMHA_IDENTITY_JWKS", type: "string", defaultText: "none", description: "the leader: where the cluster's ServiceAccount issuer keys are, to verify enrolments: `kubernetes` (the API server's `/openid/v1/jwks`), an http(s) URL, or `none` (no node identities: records read under `node:<id>`). Needs `LLMHA_INVENTORY`" },
  { key: "identityIssuer", env: "LLMHA_IDENTITY_ISSUER", type: "string", defaultText: "not checked", description: "the leader: the issuer (`iss`) enrolment tokens must name (the cluster's OIDC issuer URL)" },
  // Correctness canaries: known-answer requests, compared with the fleet's (or an operator's) expected answers.
  { key: "deepCheck", env: "LLMHA_DEEP_CHECK", type: "deepCheck", defaultText: "auto", description: "the check a node passes before it takes traffic, at agent start and after its inference server restarts (`DEEP_CHECK_PENDING` until then): `auto` runs `dcgmi diag -r 1` at agent start where `LLMHA_DCGMI` is found, then the smoke (every signal clean once) and one canary round; `dcgmi` the same with dcgmi required (missing: a start-up error); `smoke` without dcgmi; `off` joins as soon as the signals are clean (the old behaviour)" },
  { key: "dcgmi", env: "LLMHA_DCGMI", type: "path", defaultText: "dcgmi", description: "DCGM's command-line tool (a path, or a name looked up on PATH); a failed quick diagnostic keeps the node out (`GPU_DIAG_FAILED`)" },
  { key: "deepCheckTimeoutMs", env: "LLMHA_DEEP_CHECK_TIMEOUT_MS", type: "int", min: 1000, max: 3_600_000, defaultText: ms(120_000), description: "time limit of `dcgmi diag -r 1`" },
  { key: "deepCheckRetryMs", env: "LLMHA_DEEP_CHECK_RETRY_MS", type: "int", min: 1000, max: 86_400_000, defaultText: ms(600_000), description: "a failed or unrunnable dcgmi diag runs again at most this often (smoke and canary are retried continuously)" },
  { key: "canaryIntervalMs", env: "LLMHA_CANARY_INTERVAL_MS", type: "int", min: 0, max: 86_400_000, defaultText: ms(60_000), description: "how often the agent sends its server the first set of known-answer canaries (greedy, seeded, short); a node that differs is re-checked with the second set at once, then drained (`CANARY_MISMATCH`); 0 turns canaries off" },
  { key: "canaryMaxTokens", env: "LLMHA_CANARY_MAX_TOKENS", type: "int", min: 1, max: 128, defaultText: "16", description: "tokens each canary asks for (the cost: 3 requests of this many tokens a round)" },
  { key: "canaryPrefixTokens", env: "LLMHA_CANARY_PREFIX_TOKENS", type: "int", min: 1, max: 128, defaultText: "8", description: "tokens of each canary answer compared with the expectation (words where the kind returns text only); later tokens may differ with batch-dependent kernels" },
  { key: "canaryLogprobTolerance", env: "LLMHA_CANARY_LOGPROB_TOLERANCE", type: "number", min: 0, max: 10, defaultText: "0.1", description: "largest difference between a compared token's logprob and the expected one (where the kind returns logprobs); NaN or Inf is always a mismatch" },
  // The repair ladder: what the leader would do for a broken GPU node (restart, reset, reboot, replace, quarantine).
  { key: "repairMode", env: "LLMHA_REPAIR_MODE", type: "repairMode", defaultText: "advise", description: "the leader's repair ladder for broken GPU nodes: `off`, `advise` (each period the plan is published to `repair:plan`, shown by `llm-ha status`, and nothing is done) or `act` (as advise, and the plan is carried out: `restart`, `reset` (as a reboot of the instance) and `reboot` as cordon, drain, the action, wait for HEALTHY, uncordon; `replace` and `quarantine` as cordon, drain, one more instance asked of the host's Auto Scaling group, wait for a replacement HEALTHY in its AZ, terminate the host; needs LLMHA_ACTUATOR `aws` with LLMHA_INVENTORY, `local` (the drill's simulated instances) or `dry-run`, which only logs the steps)" },
  { key: "repairSpare", env: "LLMHA_REPAIR_SPARE", type: "string", defaultText: "none (no replacement in sight anywhere)", description: "replacements in sight per AZ for the repair ladder (free reservation slots, standby nodes, a fallback path), `az=count,…`; a `replace` or `quarantine` in an AZ with none is held" },
  { key: "repairPredictive", env: "LLMHA_REPAIR_PREDICTIVE", type: "string", defaultText: "`on`", description: "predictive drains, `on` or `off`: a node that still serves but whose warnings foretell a hard GPU fault (corrected ECC errors rising 100+ in 24 h, 3+ thermal/hardware slowdown episodes of one GPU in an hour, a pending row remap) is drained at a low-load moment and rebooted, within LLMHA_REPAIR_PREDICTIVE_BUDGET and the ladder's bounds (in `advise` mode only shown); `off`: a serving node's pending row remap is a `reset` at once, as before" },
  { key: "repairPredictiveBudget", env: "LLMHA_REPAIR_PREDICTIVE_BUDGET", type: "int", min: 0, max: 1000, defaultText: "2", description: "predictive drains per 24 h, fleet-wide, counted from the repair history (0: none is carried out; each is shown held, bound `budget`)" },
  { key: "repairNamespace", env: "LLMHA_REPAIR_NAMESPACE", type: "string", defaultText: "`llm-ha`", description: "`act` mode: the namespace of the inference pods a repair drains (evictions) and restarts (deletes); no other namespace is touched" },
  { key: "repairSettleMs", env: "LLMHA_REPAIR_SETTLE_MS", type: "int", min: 0, max: 3_600_000, defaultText: ms(30_000), description: "`act` mode: least time after a restart or reboot before the node's HEALTHY record counts and it is uncordoned (the record must be the new engine's)" },
  { key: "repairDrainTimeoutMs", env: "LLMHA_REPAIR_DRAIN_TIMEOUT_MS", type: "int", min: 1000, max: 86_400_000, defaultText: ms(600_000), description: "`act` mode: a drain still pending (a PodDisruptionBudget holds it) this long fails the repair; the node stays cordoned" },
  { key: "repairWaitTimeoutMs", env: "LLMHA_REPAIR_WAIT_TIMEOUT_MS", type: "int", min: 1000, max: 86_400_000, defaultText: ms(1_800_000), description: "`act` mode: a node not HEALTHY this long after its restart or reboot fails the repair (it stays cordoned)" },
  { key: "repairReplacementTimeoutMs", env: "LLMHA_REPAIR_REPLACEMENT_TIMEOUT_MS", type: "int", min: 1000, max: 86_400_000, defaultText: ms(3_600_000), description: "`act` mode: no replacement HEALTHY in the AZ this long after the surge fails a `replace` or `quarantine`: the old host stays drained and is not terminated (held, bound `failed`)" },
  // The model or engine rollout, AZ by AZ, carried out by the leader (`llm-ha rollout`, or a changed revision in the Pulumi program).
  { key: "rolloutNamespace", env: "LLMHA_ROLLOUT_NAMESPACE", type: "string", defaultText: "`llm-ha`", description: "with `LLMHA_ACTUATOR=aws` and the Kubernetes inventory: the namespace of the inference Deployments a rollout patches (one AZ at a time) and of the `llm-ha-rollout` ConfigMap the Pulumi program writes (a changed stack revision or image: a rollout request); no other namespace is touched" },
  { key: "rolloutBakeMs", env: "LLMHA_ROLLOUT_BAKE_MS", type: "int", min: 0, max: 604_800_000, defaultText: ms(300_000), description: "how long a rollout step's gates must hold once every node of the step serves the new revision, before the next step (a request's `bakeMs` overrides it)" },
  { key: "rolloutLatencyTolerance", env: "LLMHA_ROLLOUT_LATENCY_TOLERANCE", type: "number", min: 0, max: 10, defaultText: "0.2", description: "the latency gate: the median probe p50 of the nodes on the new revision may exceed that of the nodes on the old one by this share (0.2 = 20 %, and by at least 5 ms) before the rollout rolls back" },
  { key: "rolloutErrorTolerance", env: "LLMHA_ROLLOUT_ERROR_TOLERANCE", type: "number", min: 0, max: 1, defaultText: "0.01", description: "the errors gate: the new revision's probe error share may exceed the old one's by this much (0.01 = one point) before the rollout rolls back" },
  { key: "rolloutLoadTimeoutMs", env: "LLMHA_ROLLOUT_LOAD_TIMEOUT_MS", type: "int", min: 1000, max: 86_400_000, defaultText: ms(1_800_000), description: "the load-time gate: a node asked to switch that does not serve the new revision this long after fails the rollout (it rolls back)" },
  { key: "rolloutLoadRatio", env: "LLMHA_ROLLOUT_LOAD_RATIO", type: "number", min: 1, max: 100, defaultText: "3", description: "the load-time gate: a model load of the new revision longer than this multiple of the old revision's median load (where known) fails the rollout" },
];

/**
 * The settings by concern, in the order \`--help\` and docs/settings.md show them (a test checks
 * that each setting is in exactly one group).
 */
export const OPTION_GROUPS: readonly { readonly title: string; readonly keys: readonly (keyof AgentConfig)[] }[] = [
  { title: "Node identity and role", keys: ["nodeId", "az", "cluster", "role", "bindAddress", "httpPort", "agentCheckPort", "logLevel"] },
  { title: "Health decisions and rotation", keys: ["intervalMs", "fall", "rise", "warmupStepMs", "degradedWeight", "drainMs", "drainFile"] },
  { title: "GPU checks", keys: ["nvidiaSmi", "gpuCount", "gpuTimeoutMs", "gpuQuery", "xidLog", "xidRules", "pciDevices"] },
  {
    title: "Inference server and probe",
    keys: ["inferenceUrl", "inferenceKind", "inferenceApiKeyFile", "model", "modelRevision", "modelTimeoutMs", "probeLatencyMs", "probeTimeoutMs", "probeWindow", "probeMaxTokens", "probePrompt", "probeExpect", "probeStuckMs", "wedgeMs", "engineIntervalMs", "engineIdleIntervalMs", "metricsUrl"],
  },
  { title: "Redis and the leader lease", keys: ["redisUrl", "redisCaFile", "redisUser", "redisPasswordFile", "leaseTtlMs", "leaseRenewMs", "leaseContendMs"] },
  { title: "Standby AZ and practice wakes", keys: ["standbyAz", "standbyHoldMs", "standbyCapacityPercent", "coldStartGraceMs", "standbyAsgs", "standbyFallback", "capacityEngine", "standbyNodepools", "standbyPlaceholder", "standbySchedule", "standbyScheduleTz", "standbyWakeBoundMs", "standbyHealthyBoundMs", "standbyWakeBackoffMs", "practiceWake", "practiceWakeTz", "practiceWakeBudgetMs"] },
  { title: "Acting on the cloud (the leader)", keys: ["actuator", "zonalShift", "shiftExpiryMs", "awsRegion", "shiftResources", "azIds", "reservedGroups", "localCloudUrl"] },
  { title: "Inventory and node identities", keys: ["inventory", "inventorySelector", "inventoryTokenFile", "inventoryCaFile", "identityTokenFile", "identityJwks", "identityIssuer"] },
  { title: "Deep check before traffic", keys: ["deepCheck", "dcgmi", "deepCheckTimeoutMs", "deepCheckRetryMs"] },
  { title: "Correctness canaries", keys: ["canaryIntervalMs", "canaryMaxTokens", "canaryPrefixTokens", "canaryLogprobTolerance"] },
  { title: "Repair ladder (the leader)", keys: ["repairMode", "repairSpare", "repairPredictive", "repairPredictiveBudget", "repairNamespace", "repairSettleMs", "repairDrainTimeoutMs", "repairWaitTimeoutMs", "repairReplacementTimeoutMs"] },
  { title: "Model and engine rollouts (the leader)", keys: ["rolloutNamespace", "rolloutBakeMs", "rolloutLatencyTolerance", "rolloutErrorTolerance", "rolloutLoadTimeoutMs", "rolloutLoadRatio"] },
];

/** The specs of each group, in group order. */
export function groupedSpecs(): { title: string; specs: OptionSpec[] }[] {
  return OPTION_GROUPS.map((g) => ({ title: g.title, specs: g.keys.map((k) => OPTION_SPECS.find((s) => s.key === k)!) }));
}

/** `LLMHA_NODE_ID` → `--node-id`. */
export function flagOf(env: string): string {
  return "--" + env.replace(/^LLMHA_/, "").toLowerCase().replace(/_/g, "-");
}
