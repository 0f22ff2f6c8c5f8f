/**
 * Every Redis key llm-ha uses, built in one place (contracts in docs/design.md).
 * All keys live under `llmha:<cluster>:`; the Lua scripts that must reach a key they
 * cannot be handed up front (a node's hash while sweeping) get the prefix as an argument.
 *
 * | key                    | type   | written by            | what it holds |
 * |------------------------|--------|-----------------------|---------------|
 * | `node:<id>`            | hash   | each agent            | `az, status, weight, loadScore, gpus, model, updatedAt` + `gpusExpected, soft, hard, phase`, `instance` (the writing agent process: another live instance with the same id is refused), `modelRevision, modelDtype, maxContext` (what the server says it serves beyond the id in `model`; "" unknown), `gpuFault` (JSON `{xids, recovery, remap}` and `warn: {ecc, eccRise, slow}`: the GPU facts behind its hard reasons and the warning facts of a predictive drain, for the leader's repair ladder; "" none), `perf` (JSON `NodePerf` for a rollout's gates: `{at, revision, p50Ms, probes, errors, loadMs, corrupted, continuation}`, written by the agent beside its heartbeat when it changed meaningfully or every 3 periods) and `c` (compact controller view); expires when heartbeats stop |
 * | `az:<az>:available`    | zset   | agents; leader sweeps | node ids taking traffic, score = load score (lower is better) — what a gateway reads |
 * | `az:<az>:state`        | hash   | leader (fenced)       | `state, healthyCapacity, totalCapacity, nodes, nodesIn, since, firstSeen, everOk, leader, token, updatedAt` — what `/az/health` answers |
 * | `members`              | hash   | agents; leader sweeps | node id → `<az>|<gpusExpected>|<served>`: the capacity an AZ should have (`served` 1 once the node took traffic: a new node still loading is not yet counted), kept while a node is dead, dropped on graceful removal or after the forget period |
 * | `nodes`                | zset   | agents; leader sweeps | live node id → epoch ms (Redis clock) of its last heartbeat |
 * | `dead`                 | zset   | leader (sweep); agents | node id → epoch ms of its last heartbeat, for nodes whose hash expired: moved here out of `nodes` by the sweep (once: the expiry event), forgotten by score, back to `nodes` with its next heartbeat. Replaces the `expired` set of 0.1 (the sweep re-read every dead node on every tick) |
 * | `azs`                  | set    | agents                | every AZ seen (not trusted by a leader with an inventory) |
 * | `inventory`            | hash   | leader (fenced)       | with an inventory (`LLMHA_INVENTORY`): node id → `<az>|<gpus>|<served>` of every GPU node the inventory lists, `served` 1 once the leader saw it take traffic; what the next leader starts from. Agents cannot write it |
 * | `leader`               | string | lease                 | `<holderId>:<token>`, `SET NX PX` |
 * | `fence`                | string | lease                 | fencing token counter, `INCR` on every acquisition |
 * | `fence:last`           | hash   | lease + fenced writes | `token, holder` of the highest token accepted; lower tokens are refused |
 * | `tier`                 | hash   | leader (fenced)       | `level` (L0–L4), `reason, leader, token, updatedAt` |
 * | `standby:wake`         | hash   | leader (fenced)       | desired state of the standby AZ: `wake` (1/0), `az, reason, leader, token, updatedAt` |
 * | `actuation`            | hash   | leader (fenced)       | what the leader asked of the world beyond Redis: `actuator` (kind), desired `shiftAz, shiftSince, shiftReason`, and per kind (`standby`, `shift`) the last action: `<kind>.action, .az, .outcome, .detail, .at, .token` (+ `shift.expiresAt`); `leader, token, updatedAt` — what `llm-ha status` shows |
 * | `suspect`              | hash   | leader (fenced)       | `codes` (suspect soft check codes, comma separated; blast-radius cap) + `counts`, `leader, token, updatedAt` |
 * | `models`               | hash   | leader (fenced)       | same model everywhere, every 10 periods: `majority` (`id@revision dtype:… ctx:…`), `outliers` (`node=model,…`, the first 50), `outlierCount, outlierAzs, agreeing`, `differs` (JSON node → `revision+dtype`), `leader, token, updatedAt` |
 * | `practice`             | hash   | leader (fenced)       | practice wakes: `firedAt` (last firing acted on), `startedAt` (running one), `last, lastAt, lastOutcome, lastWakeMs, lastReason` |
 * | `rollout`              | hash   | leader (fenced)       | the model or engine rollout under way or the last one: `state` (JSON: steps, phase, gates), `id`, `phase`, `step`, `current` (the fleet's revision), `allow` (the revisions agents accept now: both while a rollout is active), `updatedAt`; `transition` (`id:phase:step`, with `reason, fromRevision, toRevision`: each change writes a `rollout` event, whose `from` is the previous transition), `acted`/`actedExtra` (`op:id:at` of the last request acted on from `rollout:request` / the Pulumi program's source), `refused` (the last request refused, with why); `leader, token, at` |
 * | `rollout:request`      | string | `llm-ha rollout`, the Pulumi program | JSON `{op: start\|pause\|resume\|abort\|promote, id, at, to?, bakeMs?, by?}`; the leader acts on each id once |
 * | `repair:plan`          | hash   | leader (fenced)       | the repair ladder's plan (`LLMHA_REPAIR_MODE=advise`): node id → JSON `{action, wanted, reason, since, host, az, fault, bound}` for each broken GPU node (`action` `restart`, `reset`, `reboot`, `replace`, `quarantine` or `held`); `:updatedAt`, `:mode`, `:quarantined` (hosts, comma separated); `leader, token, at`. A decision that changes writes a `repair.advised` event. Agents cannot write it |
 * | `repair:history`       | hash   | leader (fenced)       | repairs acted on (`LLMHA_REPAIR_MODE=act`): host (instance id, or node id without an inventory) → JSON list `[{action, at, nodeId, outcome, fault}]` trimmed to the quarantine window (24 h); the ladder's history |
 * | `repair:active`        | hash   | leader (fenced)       | repairs under way (`act`): node id → JSON `{action, step, since, startedAt, token, host, az, fault, detail}`, `step` `cordon`, `drain`, `action`, `wait` or `failed`; a new leader continues them. Each step writes a `repair.started`, `repair.done` or `repair.failed` event |
 * | `practice:request`     | string | `llm-ha practice`     | epoch ms of an operator's request for a practice wake now; the leader acts on it once (as a schedule firing), then its `firedAt` covers it |
 * | `edge:keys`            | hash   | `llm-ha keys`         | client API keys of the public edge: SHA-256 hex of the key → JSON `{id, tenant, rps, concurrency, createdAt, note}`; the key itself is never stored |
 * | `edge:keys:rev`        | string | `llm-ha keys`         | counter bumped on every key change: `llm-ha edge-sync` re-reads `edge:keys` when it moves |
 * | `events`               | stream | agents + leader       | every node status, AZ state, tier and standby transition, capped by `MAXLEN ~` |
 * | `fallback:cache:*`     | mixed  | `llm-ha cache import` | the verified-answer cache (entries `e:<sha256>`, `lru`, `size`, `bytes`; see fallback/cache.ts); the fallback only reads entries |
 * | `fallback:req:<id>`    | string | `llm-ha fallback`     | a queued request's record: state, tenant, times, status (fallback/results.ts) |
 * | `fallback:body:<id>`   | string | `llm-ha fallback`     | its result body, written with the final state; readable by the fallback alone |
 * | `fallback:queue`       | hash   | `llm-ha fallback`     | the Kafka queue's depth for `llm-ha status` |
 * | `node:<id>:<capability>` | hash | each enrolled agent | with node identities (`LLMHA_IDENTITY_TOKEN_FILE`): the same record as `node:<id>`, under a key whose last part only that agent and the leader know (128 random bits handed out at enrolment); the agent role has no SCAN/KEYS, so no node finds or touches another's |
 * | `enrol`                | stream | agents (append only)  | enrolment requests `{nodeId, token, publicKey}`: the node's projected ServiceAccount token and a public key of its own; the agent role may only XADD (`%W~`), so no node reads another's token; the leader reads and deletes them |
 * | `enrolled`             | hash   | leader                | node id → JSON `{seal, key, at}`: the node's capability sealed to its public key (`key`: SHA-256 of that key, first 16 hex) |
 * | `enrolled:digests`     | hash   | leader                | node id → the first 16 hex of SHA-256 of its capability: how readers (`llm-ha status`, `llm-ha canary`) find the node's record among `node:<id>:*` without the capability; any other `node:<id>:<x>` is not the node's. Agents may not write it |
 * | `llmha-caps:<cluster>` | hash   | leader only           | node id → capability. Outside the `llmha:<cluster>:` prefix so that no role reading that prefix (`llmha-reader`, `llmha-operator`) reads it |
 * | `canary:answers`       | hash   | each agent; leader prunes | node id → JSON `{az, model, at, answers}`: its latest correctness-canary answers per prompt id; with an inventory only its nodes' fields vote, the leader deletes the others |
 * | `canary:expect`        | hash   | leader (fenced)       | `m:<model key>` → JSON expectation `{source, at, answers, nodes, agreeing, disagreeing, capped}`, learned from the fleet's majority or recorded; `leader, token, updatedAt` |
 * | `canary:recorded`      | hash   | `llm-ha canary record` | `m:<model key>` → JSON expectation an operator recorded; it takes precedence over the fleet's |
 *
 * Who may touch which key is `roles.ts` (one Redis ACL user per role).
 */
export class RedisKeys {
  readonly prefix: string;

  constructor(readonly cluster: string) {
    if (!/^[A-Za-z0-9_.-]+$/.test(cluster)) {
      throw new RangeError(`cluster name must match [A-Za-z0-9_.-]+, got ${JSON.stringify(cluster)}`);
    }
    this.prefix = `llmha:${cluster}:`;
  }

  node(id: string): string {
    return `${this.prefix}node:${id}`;
  }
  azAvailable(az: string): string {
    return `${this.prefix}az:${az}:available`;
  }
  azState(az: string): string {
    return `${this.prefix}az:${az}:state`;
  }
  get members(): string {
    return `${this.prefix}members`;
  }
  get nodes(): string {
    return `${this.prefix}nodes`;
  }
  get dead(): string {
    return `${this.prefix}dead`;
  }
  get azs(): string {
    return `${this.prefix}azs`;
  }
  /** A node's record under its capability (node identities). */
  nodeRecord(id: string, capability: string): string {
    return `${this.prefix}node:${id}:${capability}`;
  }
  get enrol(): string {
    return `${this.prefix}enrol`;
  }
  get enrolled(): string {
    return `${this.prefix}enrolled`;
  }
  /** node id → digest of its capability (`recordDigest`): readers find the node's record by it. */
  get recordDigests(): string {
    return `${this.prefix}enrolled:digests`;
  }
  /** node id → capability: outside the cluster prefix, so that roles reading `llmha:<cluster>:*` do not reach it. */
  get capabilities(): string {
    return `llmha-caps:${this.cluster}`;
  }
  /** The leader's own view of the inventory (fenced; agents cannot write it). */
  get inventory(): string {
    return `${this.prefix}inventory`;
  }
  get leader(): string {
    return `${this.prefix}leader`;
  }
  get fence(): string {
    return `${this.prefix}fence`;
  }
  get fenceLast(): string {
    return `${this.prefix}fence:last`;
  }
  get tier(): string {
    return `${this.prefix}tier`;
  }
  get standbyWake(): string {
    return `${this.prefix}standby:wake`;
  }
  /** An operator's request for a practice wake now (`llm-ha practice`). */
  get practiceRequest(): string {
    return `${this.prefix}practice:request`;
  }
  get actuation(): string {
    return `${this.prefix}actuation`;
  }
  get suspect(): string {
    return `${this.prefix}suspect`;
  }
  /** Client API keys of the edge, by hash (`llm-ha keys`, read by `llm-ha edge-sync`). */
  get edgeKeys(): string {
    return `${this.prefix}edge:keys`;
  }
  get edgeKeysRev(): string {
    return `${this.prefix}edge:keys:rev`;
  }
  get events(): string {
    return `${this.prefix}events`;
  }
  get practice(): string {
    return `${this.prefix}practice`;
  }
  get models(): string {
    return `${this.prefix}models`;
  }
  /** The repair ladder's published plan (leader, fenced): node id → JSON decision. */
  get repairPlan(): string {
    return `${this.prefix}repair:plan`;
  }
  /** Repairs acted on (`act` mode; leader, fenced): host → JSON list of `{action, at, nodeId, outcome, fault}` within the quarantine window. */
  get repairHistory(): string {
    return `${this.prefix}repair:history`;
  }
  /** Repairs under way (`act` mode; leader, fenced): node id → JSON `{action, step, since, token, …}`; a new leader continues them. */
  get repairActive(): string {
    return `${this.prefix}repair:active`;
  }
  /** Every key of the verified-answer cache starts with this. */
  get fallbackCache(): string {
    return `${this.prefix}fallback:cache:`;
  }
  /** Every queued request's result starts with this. */
  get fallbackRequests(): string {
    return `${this.prefix}fallback:req:`;
  }
  /** A queued request's result body, apart from its record so that only the fallback's role reads it. */
  get fallbackBodies(): string {
    return `${this.prefix}fallback:body:`;
  }
  /** A tenant's idempotency key starts with this: `<prefix><tenant>:<sha256 of the key>`. */
  get fallbackIdempotency(): string {
    return `${this.prefix}fallback:idem:`;
  }
  get fallbackQueue(): string {
    return `${this.prefix}fallback:queue`;
  }
  // Correctness canaries.
  get canaryAnswers(): string {
    return `${this.prefix}canary:answers`;
  }
  get canaryExpect(): string {
    return `${this.prefix}canary:expect`;
  }
  get canaryRecorded(): string {
    return `${this.prefix}canary:recorded`;
  }
  /** The rollout under way or the last one (leader, fenced): `state` (JSON), `id`, `phase`, `step`, `current`, `allow`, `updatedAt`. */
  get rollout(): string {
    return `${this.prefix}rollout`;
  }
  /** An operator's or the Pulumi program's rollout request (JSON `{op, id, at, to?, bakeMs?, by?}`), acted on once per id by the leader. */
  get rolloutRequest(): string {
    return `${this.prefix}rollout:request`;
  }
}
