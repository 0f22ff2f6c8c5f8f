/**
 * `llm-ha preflight --online` for an adopted data tier (`llm-ha:redis.existing`,
 * `llm-ha:kafka.existing`): the stack changes nothing on the operator's replication group or MSK
 * cluster but its role users and ingress rules, so what llm-ha's HA relies on there is read here,
 * through the `aws` CLI (infra/preflight/aws-cli.ts), each finding with the command that fixes it.
 */
import { KAFKA_SERVER_PROPERTIES } from "../kafka";
import type { StackConfig } from "../config";
import type { ExistingKafkaConfig, ExistingRedisConfig } from "../config/data";
import type { AwsCli, AwsCliError } from "./aws-cli";
import type { CheckRow } from "./checks";

export const ADOPTED_REDIS_CHECK = "adopted Redis";
export const ADOPTED_MSK_CHECK = "adopted MSK";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const code = (err: unknown) => (err as AwsCliError).code;

/** The oldest engine whose Redis Functions llm-ha's scripts are (`FUNCTION LOAD`, `FCALL`). */
export const MIN_REDIS_MAJOR = 7;

/** The adopted replication group: TLS required, failover and Multi-AZ, one shard, the user group, Redis ≥ 7, `noeviction`. */
export async function adoptedRedisRows(e: ExistingRedisConfig, cli: AwsCli): Promise<CheckRow[]> {
  const id = e.replicationGroupId;
  const check = (what: string) => `${ADOPTED_REDIS_CHECK} ${what}`;
  const modify = (flags: string) => `aws elasticache modify-replication-group --replication-group-id ${id} ${flags} --apply-immediately`;
  let rg: Obj;
  try {
    rg = obj(arr(obj(await cli(["elasticache", "describe-replication-groups", "--replication-group-id", id])).ReplicationGroups)[0]);
  } catch (err) {
    if (code(err) !== "ReplicationGroupNotFoundFault") throw err;
    rg = {};
  }
  if (rg.ReplicationGroupId === undefined) {
    return [{ check: check(id), status: "missing", detail: `no replication group ${id} in this account and region`, fix: "set llm-ha:redis.existing.replicationGroupId to one of: aws elasticache describe-replication-groups --query 'ReplicationGroups[].ReplicationGroupId'" }];
  }
  const rows: CheckRow[] = [];
  const row = (what: string, good: boolean, okDetail: string, badDetail: string, fix: string) => rows.push(good ? { check: check(what), status: "ok", detail: okDetail, fix: "" } : { check: check(what), status: "invalid", detail: badDetail, fix });
  const mode = typeof rg.TransitEncryptionMode === "string" ? rg.TransitEncryptionMode : undefined;
  row(
    "TLS",
    rg.TransitEncryptionEnabled === true && (mode === undefined || mode === "required"),
    `${id}: TLS required`,
    `${id}: TLS ${rg.TransitEncryptionEnabled === true ? `in mode ${mode}` : "off"}: the role passwords and the lease would cross the network in clear; llm-ha's clients speak rediss:// only`,
    rg.TransitEncryptionEnabled === true ? modify("--transit-encryption-mode required") : `${modify("--transit-encryption-enabled --transit-encryption-mode preferred")}, then once every client speaks TLS: ${modify("--transit-encryption-mode required")}`,
  );
  row("failover", rg.AutomaticFailover === "enabled", `${id}: automatic failover enabled`, `${id}: automatic failover ${String(rg.AutomaticFailover ?? "unset")}: a lost primary stops every write (the lease, the registry) until someone acts`, modify("--automatic-failover-enabled"));
  row("Multi-AZ", rg.MultiAZ === "enabled", `${id}: Multi-AZ enabled`, `${id}: Multi-AZ ${String(rg.MultiAZ ?? "unset")}: an AZ's loss may take the primary and its replica together`, modify("--multi-az-enabled"));
  const clustered = rg.ClusterEnabled === true || (typeof rg.ClusterMode === "string" && rg.ClusterMode !== "disabled");
  row("cluster mode", !clustered, `${id}: cluster mode disabled (one primary)`, `${id}: cluster mode ${String(rg.ClusterMode ?? "enabled")}: llm-ha's functions touch keys of several hash slots (CROSSSLOT)`, "a group cannot leave cluster mode: adopt a cluster-mode-disabled group, or remove llm-ha:redis.existing and let the stack create one");
  const groups = arr(rg.UserGroupIds).map(String);
  row("user group", groups.includes(e.userGroupId), `${id}: user group ${e.userGroupId} attached`, `${id}: user group ${e.userGroupId} is not attached (${groups.length ? groups.join(", ") : "none"}): the role users the stack adds to it could not authenticate there`, modify(`--user-group-ids-to-add ${e.userGroupId}`));

  // The engine version and the parameter group are the member clusters': the first one's speak for the group.
  const member = arr(rg.MemberClusters).map(String)[0];
  if (member === undefined) {
    rows.push({ check: check("nodes"), status: "invalid", detail: `${id}: no member clusters`, fix: `aws elasticache describe-replication-groups --replication-group-id ${id}` });
    return rows;
  }
  const cc = obj(arr(obj(await cli(["elasticache", "describe-cache-clusters", "--cache-cluster-id", member])).CacheClusters)[0]);
  const version = String(cc.EngineVersion ?? "");
  const major = Number(/^(\d+)/.exec(version)?.[1] ?? NaN);
  row("engine", major >= MIN_REDIS_MAJOR, `${id}: Redis ${version}`, `${id}: Redis ${version || "(unknown)"}: llm-ha's scripts are Redis Functions (FUNCTION LOAD, FCALL), which need ${MIN_REDIS_MAJOR} or later`, `${modify("--engine-version 7.1")} (with a redis7 parameter group that sets maxmemory-policy noeviction: --cache-parameter-group-name <group>)`);
  const sgs = arr(cc.SecurityGroups).map((s) => String(obj(s).SecurityGroupId));
  row("security group", sgs.includes(e.securityGroupId), `${id}: ${e.securityGroupId} is one of its security groups`, `${id}: ${e.securityGroupId} is not one of its security groups (${sgs.join(", ") || "none"}): the ingress rules the stack adds there would let nobody in`, `set llm-ha:redis.existing.securityGroupId to one of ${sgs.join(", ") || "its groups"}, or ${modify(`--security-group-ids ${[...sgs, e.securityGroupId].join(" ")}`)}`);
  const pg = String(obj(cc.CacheParameterGroup).CacheParameterGroupName ?? "");
  const params = arr(obj(await cli(["elasticache", "describe-cache-parameters", "--cache-parameter-group-name", pg])).Parameters).map(obj);
  const policy = params.find((p) => p.ParameterName === "maxmemory-policy")?.ParameterValue;
  // A default group cannot be changed: one of llm-ha's, of the engine's family (7 at least, which the engine needs anyway).
  const family = Math.max(major || MIN_REDIS_MAJOR, MIN_REDIS_MAJOR);
  const own = `aws elasticache create-cache-parameter-group --cache-parameter-group-name llm-ha-redis${family} --cache-parameter-group-family redis${family} --description 'llm-ha: never evict'; aws elasticache modify-cache-parameter-group --cache-parameter-group-name llm-ha-redis${family} --parameter-name-values ParameterName=maxmemory-policy,ParameterValue=noeviction; ${modify(`--cache-parameter-group-name llm-ha-redis${family}`)}`;
  row(
    "eviction",
    policy === "noeviction",
    `${id}: maxmemory-policy noeviction (parameter group ${pg})`,
    `${id}: maxmemory-policy ${String(policy ?? "unset")} (parameter group ${pg}): the leader lease, the fencing keys and the node records carry TTLs, and a volatile-* policy evicts exactly those under memory pressure; with noeviction a full Redis refuses writes, which llm-ha degrades on`,
    pg.startsWith("default.") ? own : `aws elasticache modify-cache-parameter-group --cache-parameter-group-name ${pg} --parameter-name-values ParameterName=maxmemory-policy,ParameterValue=noeviction`,
  );
  return rows;
}

/** `key=value` lines of a server.properties text (comments and blanks skipped). */
export function serverProperties(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    const i = t.indexOf("=");
    if (i > 0) out.set(t.slice(0, i).trim(), t.slice(i + 1).trim());
  }
  return out;
}

/** What llm-ha needs of each server property (`KAFKA_SERVER_PROPERTIES` in infra/kafka.ts says why), as a test of the value. */
const REQUIRED_PROPERTIES: Record<string, { ok: (v: string) => boolean; want: string }> = {
  "default.replication.factor": { ok: (v) => v === "3", want: "3" },
  "min.insync.replicas": { ok: (v) => v === "2", want: "2" },
  "unclean.leader.election.enable": { ok: (v) => v === "false", want: "false" },
  "auto.create.topics.enable": { ok: (v) => v === "false", want: "false" },
  "group.min.session.timeout.ms": { ok: (v) => /^\d+$/.test(v) && Number(v) <= 2000, want: "≤ 2000" },
};

/** The adopted MSK cluster: IAM auth, TLS to clients, ≥ 3 brokers over ≥ 2 AZs, the security group, llm-ha's server properties. */
export async function adoptedMskRows(e: ExistingKafkaConfig, cli: AwsCli): Promise<CheckRow[]> {
  const arn = e.clusterArn;
  const name = /:cluster\/([^/]+)\//.exec(arn)?.[1] ?? arn;
  const check = (what: string) => `${ADOPTED_MSK_CHECK} ${what}`;
  let info: Obj;
  try {
    info = obj(obj(await cli(["kafka", "describe-cluster-v2", "--cluster-arn", arn])).ClusterInfo);
  } catch (err) {
    if (code(err) !== "NotFoundException") throw err;
    info = {};
  }
  if (info.ClusterArn === undefined) {
    return [{ check: check(name), status: "missing", detail: `no MSK cluster ${arn} in this account and region`, fix: "set llm-ha:kafka.existing.clusterArn to one of: aws kafka list-clusters-v2 --query 'ClusterInfoList[].ClusterArn'" }];
  }
  const p = obj(info.Provisioned);
  if (info.ClusterType !== "PROVISIONED" || Object.keys(p).length === 0) {
    return [{ check: check(name), status: "invalid", detail: `${name} is ${String(info.ClusterType ?? "not provisioned")}: its server properties (replication, unclean election, session floor) cannot be set`, fix: "adopt a provisioned MSK cluster, or remove llm-ha:kafka.existing and let the stack create one" }];
  }
  const version = String(info.CurrentVersion ?? "<current version>");
  const rows: CheckRow[] = [];
  const row = (what: string, good: boolean, okDetail: string, badDetail: string, fix: string) => rows.push(good ? { check: check(what), status: "ok", detail: okDetail, fix: "" } : { check: check(what), status: "invalid", detail: badDetail, fix });
  const auth = obj(p.ClientAuthentication);
  row("IAM auth", obj(obj(auth.Sasl).Iam).Enabled === true, `${name}: SASL/IAM client authentication on`, `${name}: SASL/IAM client authentication off: the fallback authenticates with its IRSA role only (port 9098)`, `aws kafka update-security --cluster-arn ${arn} --current-version ${version} --client-authentication '{"Sasl":{"Iam":{"Enabled":true}}}'`);
  const transit = obj(obj(p.EncryptionInfo).EncryptionInTransit);
  row("TLS", transit.ClientBroker === "TLS", `${name}: TLS between clients and brokers`, `${name}: client-broker encryption ${String(transit.ClientBroker ?? "unset")}: the queued requests would cross the network in clear`, `aws kafka update-security --cluster-arn ${arn} --current-version ${version} --encryption-info '{"EncryptionInTransit":{"ClientBroker":"TLS"}}'`);
  const brokers = Number(p.NumberOfBrokerNodes ?? 0);
  const group = obj(p.BrokerNodeGroupInfo);
  const azs = new Set(arr(group.ZoneIds).length > 0 ? arr(group.ZoneIds).map(String) : arr(group.ClientSubnets).map(String)).size;
  row("brokers", brokers >= 3 && azs >= 2, `${name}: ${brokers} brokers over ${azs} AZs`, `${name}: ${brokers} brokers over ${azs} AZs: replication factor 3 with min.insync.replicas 2 needs ≥ 3 brokers, and an AZ's loss ≥ 2 AZs`, azs < 2 ? "a cluster in one AZ cannot be spread over more: adopt another, or remove llm-ha:kafka.existing and let the stack create one" : `aws kafka update-broker-count --cluster-arn ${arn} --current-version ${version} --target-number-of-broker-nodes ${Math.ceil(3 / azs) * azs} (a multiple of its ${azs} AZs)`);
  const sgs = arr(group.SecurityGroups).map(String);
  row("security group", sgs.includes(e.securityGroupId), `${name}: ${e.securityGroupId} is one of the brokers' security groups`, `${name}: ${e.securityGroupId} is not one of the brokers' security groups (${sgs.join(", ") || "none"}): the L1 pods' ingress rule would let nobody in`, `set llm-ha:kafka.existing.securityGroupId to one of ${sgs.join(", ") || "the brokers' groups"}`);

  const sw = obj(p.CurrentBrokerSoftwareInfo);
  const newRevision = `printf '%s\\n' ${KAFKA_SERVER_PROPERTIES.split("\n").map((l) => `'${l}'`).join(" ")} > llm-ha.properties`;
  if (typeof sw.ConfigurationArn !== "string" || sw.ConfigurationArn === "") {
    rows.push({
      check: check("server properties"),
      status: "invalid",
      detail: `${name} runs MSK's default configuration: llm-ha needs ${KAFKA_SERVER_PROPERTIES.split("\n").join(", ")}`,
      fix: `${newRevision}; aws kafka create-configuration --name llm-ha --server-properties fileb://llm-ha.properties; aws kafka update-cluster-configuration --cluster-arn ${arn} --current-version ${version} --configuration-info Arn=<the new configuration's ARN>,Revision=1`,
    });
    return rows;
  }
  const revision = String(sw.ConfigurationRevision ?? "");
  const r = obj(await cli(["kafka", "describe-configuration-revision", "--arn", sw.ConfigurationArn, "--revision", revision]));
  const props = serverProperties(Buffer.from(String(r.ServerProperties ?? ""), "base64").toString("utf8"));
  const wrong = Object.entries(REQUIRED_PROPERTIES).filter(([k, { ok }]) => !ok(props.get(k) ?? "")).map(([k, { want }]) => `${k}=${props.get(k) ?? "(unset: MSK's default)"} (needs ${want})`);
  row(
    "server properties",
    wrong.length === 0,
    `${name}: configuration revision ${revision} sets ${Object.keys(REQUIRED_PROPERTIES).join(", ")} as llm-ha needs`,
    `${name}: configuration revision ${revision}: ${wrong.join("; ")}. Replication 3 with 2 in sync keeps the L4 queue through a broker's or an AZ's loss; no unclean election loses no acknowledged request; no auto-created topics; a 2 s session floor lets a crashed fallback's partitions move within ~3 s`,
    `add llm-ha's lines (${newRevision}) to the configuration's properties, then aws kafka update-configuration --arn ${sw.ConfigurationArn} --server-properties fileb://llm-ha.properties; aws kafka update-cluster-configuration --cluster-arn ${arn} --current-version ${version} --configuration-info Arn=${sw.ConfigurationArn},Revision=<the new revision>`,
  );
  return rows;
}

/** The adopted data tier's rows (none where the stack creates its own), one guarded check per store. */
export async function adoptedDataChecks(c: StackConfig, cli: AwsCli, guard: (check: string, f: () => Promise<CheckRow[]>) => Promise<void>): Promise<void> {
  const redis = c.redis.existing;
  const kafka = c.kafka.existing;
  if (redis) await guard(ADOPTED_REDIS_CHECK, () => adoptedRedisRows(redis, cli));
  if (kafka) await guard(ADOPTED_MSK_CHECK, () => adoptedMskRows(kafka, cli));
}
