/**
 * The drill's world on loopback: a real redis-server, N simulated GPU nodes (fake
 * nvidia-smi + fake inference server + real agent) over 2–3 AZs, one HAProxy per AZ
 * listening on that AZ's own loopback address (local nodes + the other AZs' as backup; its
 * monitor frontend and its own `/az/health` listener on the same address, other ports),
 * one HAProxy carrying the two baselines over the same servers, and PowerDNS answering
 * the service name with the AZ addresses whose `/az/health` passes. With a standby AZ, its
 * nodes start stopped (scaled to zero) and the agents act through the local cloud
 * (`LLMHA_ACTUATOR=local`), which boots them when the leader wakes the standby.
 * Every process started is registered for `stop()` as soon as it exists.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { RoleName } from "../../agent/src/fleet/redis/roles";
import { labRedisAcl, labRoleEnv } from "../engines/redis-acl";
import { startHaproxy, startHaproxyWith, type HaproxyHandle } from "../engines/haproxy";
import { renderHaproxyConfig } from "../../contracts/haproxy-config";
import { drillRelayConfig, startDrillRelay } from "./continuation";
import { startPdns, type PdnsHandle } from "../engines/pdns";
import { startRedisHa, type RedisHaHandle } from "../engines/redis-ha";
import type { HaproxyProxy } from "../../contracts/haproxy-config";
import type { KeyStore } from "../../agent/src/edge/keys/keys";
import type { EdgeSync } from "../../agent/src/edge/keys/sync";
import type { EdgeSink } from "../../agent/src/edge/keys/sink";
import { startDrillEdge } from "./edge";
import { SimNode, type SimNodePorts } from "../sim/sim-node";
import { freePort } from "../../agent/src/util/net";
import { LocalCloud } from "./local-cloud";
import { AgentEnvSwitch } from "./agent-env";
import { connectFrom, placeMembers, RedisPaths, type DrillPlacement } from "./placement";
import { DRILL_AGENT_ENV, DRILL_BOOT_MS, DRILL_STANDBY_ENV, DRILL_MODEL, DRILL_REVISION } from "./settings";
import { azProxy, backendOf, baselineProxies, DRILL_ZONE, nodeAddress, nodeGroup, nodesRecord, placeNodes, pool, slotNames, startNodeWithRetry } from "./stack-layout";

export { DRILL_MODEL };
export { azProxy, backendOf, BASELINE_DEFAULT, BASELINE_TUNED, baselineProxies, DRILL_ZONE, nodeAddress, nodeGroup, nodesRecord, placeNodes, slotNames } from "./stack-layout";

export interface DrillAz {
  name: string;
  /** Loopback address its HAProxy listens on (and DNS answers). */
  address: string;
  standby: boolean;
  /** Null while the AZ's HAProxy is down (L3 scenario). */
  haproxy: HaproxyHandle | null;
  /** Backend name of its proxy in `show stat` (the server rows). */
  proxy: string;
  /** Index of the AZ (its nodes' addresses are 127.1.<index>.<n>). */
  index: number;
}

export interface DrillStack {
  readonly cluster: string;
  /** Where each node's projected ServiceAccount token lies (`<node id>.token`): what root on that node could read. */
  readonly tokenDir: string;
  /** The public edge of the AZ proxies: the key store, its sync into their maps, the 413 sink. */
  readonly edge: { store: KeyStore; sync: EdgeSync; sink: EdgeSink; reseed(): Promise<void> };
  /**
   * Primary + replica + sentinels behind one endpoint, as ElastiCache Multi-AZ, with the
   * production roles' ACL file (default user off): `url` is the harness's own admin login.
   */
  readonly redis: RedisHaHandle;
  /**
   * How an llm-ha process logs in as `role`: the endpoint's URL without credentials and the
   * env naming the user and its password file (never argv).
   */
  redisAs(role: RoleName): { url: string; env: Record<string, string> };
  readonly azs: DrillAz[];
  /** Where each Redis member and Kafka broker lives (each AZ proxy and node lives in its own AZ). */
  readonly placement: DrillPlacement;
  /**
   * Each node's own path to the Redis endpoint (from its address): what a cut or a delay acts on.
   * Null unless asked for (`StackOptions.redisPaths`): the paths run in the drill's own process.
   */
  readonly redisPaths: RedisPaths | null;
  readonly nodes: SimNode[];
  /**
   * Spare instance slots of the active AZs (`StackOptions.spares`): stopped until a repair's surge
   * boots one (local-instances.ts); then in DNS, HAProxy and the inventory as any node. Apart from
   * `nodes`, so the other scenarios never pick one.
   */
  readonly spares: SimNode[];
  readonly baseline: HaproxyHandle;
  readonly baselinePorts: { default: number; tuned: number };
  readonly dns: PdnsHandle;
  /** Port every AZ proxy listens on (its address differs). */
  readonly port: number;
  /** Port of every AZ proxy's monitor frontend (`/healthz`, `/stats`) on the AZ's address. */
  readonly monitorPort: number;
  /** Port of every AZ proxy's own `/az/health` listener on the AZ's address. */
  readonly azHealthPort: number;
  /** The ports every node listens on, each on its own address (pods behind a headless Service). */
  readonly nodePorts: SimNodePorts;
  /** The standby AZ (scaled to zero at start), null with 2 AZs. */
  readonly standby: DrillAz | null;
  /** Powers the standby nodes and shifts zones for the agents' `local` actuator; null without a standby AZ. */
  readonly cloud: LocalCloud | null;
  /** Nodes whose processes run now (a standby node at zero does not). */
  running(): SimNode[];
  /**
   * Gives every node's agent these settings on top of the drill's (null: none): the running agents
   * are restarted one at a time, each back HEALTHY before the next; stopped ones get them at
   * their next boot. Resolves false when an agent did not come back in time.
   */
  setAgentEnv(env: Readonly<Record<string, string>> | null): Promise<boolean>;
  azOf(node: SimNode): DrillAz;
  /** The node a server row points at (`show stat` addr, `address:port`), null for an empty slot. */
  nodeAt(addr: string): SimNode | null;
  /** Pids of every process running now (nodes, proxies, Redis, PowerDNS). */
  pids(): number[];
  /** SIGKILL an AZ's HAProxy (whole-zone loss). */
  killAzProxy(az: DrillAz): void;
  /**
   * Every death so far (epoch ms): inference servers that ended other than by a planned stop
   * (`server`: `address:port`) and AZ proxies killed (`via`: the AZ's address).
   */
  deaths(): { at: number; server?: string; via?: string }[];
  /** Starts an AZ's HAProxy again with the same configuration. */
  startAzProxy(az: DrillAz): Promise<void>;
  stop(): Promise<void>;
}

export interface StackOptions {
  nodes: number;
  /** AZ count, 2 or 3; the last is the standby. Default 3 when nodes ≥ 5, else 2. */
  azs?: number;
  dir: string;
  progress(line: string): void;
  /**
   * Registers a stop function at once (for Ctrl-C during start-up). Stops of one `group` that
   * follow each other run together (the nodes: each agent drains for a second when stopped).
   */
  track(stop: () => Promise<void>, group?: string): void;
  /** Drill clock (the local cloud's action log). */
  now?(): number;
  /**
   * Every node reaches Redis over a path of its own (placement.ts), for the scenarios that cut
   * or slow it. Off by default: the paths run in the drill's process, whose event loop then sits
   * on every agent's Redis traffic.
   */
  redisPaths?: boolean;
  /** Spare instance slots per active AZ, started stopped (needs a standby AZ: the local cloud boots them). Default 0. */
  spares?: number;
  /** Nodes added to the first AZ beyond the round-robin placement (a scenario faulting many nodes of one AZ). Default 0. */
  firstAzExtra?: number;
  /** Agent settings on top of the drill's from the start (`setAgentEnv` changes them later). */
  agentEnv?: Readonly<Record<string, string>>;
}

export async function startStack(o: StackOptions): Promise<DrillStack> {
  const azCount = o.azs ?? (o.nodes >= 5 ? 3 : 2);
  const names = Array.from({ length: azCount }, (_, i) => `az-${String.fromCharCode(97 + i)}`);
  const cluster = `drill-${randomBytes(3).toString("hex")}`;
  o.progress(`starting Redis: primary + replica, 3 sentinels, an HAProxy endpoint following the primary`);
  const acl = labRedisAcl(cluster);
  const redis = await startRedisHa({ acl });
  o.track(() => redis.stop());
  const secrets = join(o.dir, "redis-users");
  mkdirSync(secrets, { recursive: true });
  const redisAs = (role: RoleName): { url: string; env: Record<string, string> } => ({ url: `redis://127.0.0.1:${redis.port}`, env: labRoleEnv(acl, secrets, role) });
  // The leader runs inside an agent process today: agents that contend hold the agent and controller roles.
  const agentRedis = redisAs("llmha-agent-leader");
  const paths = o.redisPaths ? new RedisPaths(redis.port, await freePort()) : null;
  if (paths) o.track(() => paths.close());
  const nodes: SimNode[] = [];
  const placement = [...placeNodes(o.nodes, names), ...Array.from({ length: o.firstAzExtra ?? 0 }, () => names[0])];
  const reserved = new Map<string, number>();
  const standbyName = azCount > 2 ? names[azCount - 1] : null;
  let cloud: LocalCloud | null = null;
  let fleetEnv: Record<string, string> = {};
  // The local cloud also serves the leader's inventory (which GPU nodes exist, in which AZ):
  // started in every drill, acting on nodes only with a standby AZ.
  const tokenDir = join(o.dir, "tokens");
  const inventory = new LocalCloud({ now: o.now ?? Date.now, log: o.progress });
  await inventory.listen();
  o.track(() => inventory.stop());
  // It also plays the cluster's ServiceAccount issuer: each node's agent enrols with a token it minted (node identities).
  fleetEnv = { LLMHA_INVENTORY: inventory.url, LLMHA_IDENTITY_JWKS: `${inventory.url}/openid/v1/jwks`, LLMHA_IDENTITY_ISSUER: inventory.kube.issuer };
  // Listed as they start (the array fills below): a node is in the inventory once its processes run.
  const hosts: SimNode[] = [];
  inventory.kube.serveInventory(hosts);
  if (standbyName) {
    cloud = inventory;
    fleetEnv = { ...fleetEnv, ...DRILL_STANDBY_ENV, LLMHA_STANDBY_AZ: standbyName, LLMHA_LOCAL_CLOUD_URL: inventory.url };
  }
  // Every node gets the same ports on an address of its own, as pods behind a headless Service.
  const [inference, admin, http, agentCheck] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const nodePorts: SimNodePorts = { inference, admin, http, agentCheck };
  o.progress(
    `starting ${o.nodes} simulated GPU nodes over ${azCount} AZs (fake nvidia-smi + fake inference + real agent, each on its own 127.1.x.y)` +
      (standbyName ? `; ${standbyName} is the standby, scaled to zero` : ""),
  );
  const spareAzs = standbyName ? names.filter((n) => n !== standbyName) : [];
  const spareSlots = spareAzs.flatMap((az) => Array.from({ length: o.spares ?? 0 }, () => az));
  const spares: SimNode[] = [];
  const startOne = async (az: string, spare: boolean): Promise<void> => {
    // Reserve the id before the await so two starts in the same AZ never share it.
    const seq = reserved.get(az) ?? 0;
    reserved.set(az, seq + 1);
    const address = nodeAddress(names.indexOf(az), seq);
    // The agent reaches Redis over its node's own path (leaving from the node's address), when asked for.
    const redisUrl = paths ? `redis://${(await paths.open(address)).url}` : agentRedis.url;
    const nodeId = `gpu-${az.slice(3)}${seq + 1}`;
    const tokenFile = join(tokenDir, `${nodeId}.token`);
    await inventory.kube.mintToken(nodeId, tokenFile);
    const node = await startNodeWithRetry(() =>
      SimNode.start({
        id: nodeId,
        az,
        dir: join(o.dir, "nodes"),
        model: DRILL_MODEL,
        // The fleet's revision before any rollout (a rollout's switch changes it).
        inference: { revision: DRILL_REVISION },
        env: { ...DRILL_AGENT_ENV, ...fleetEnv, LLMHA_IDENTITY_TOKEN_FILE: tokenFile, LLMHA_REDIS_URL: redisUrl, ...agentRedis.env, LLMHA_CLUSTER: cluster, ...o.agentEnv },
        stopped: az === standbyName || spare,
        address,
        ports: nodePorts,
      }),
    );
    (spare ? spares : nodes).push(node);
    hosts.push(node);
    o.track(() => node.stop(), "nodes");
    o.progress(`  node ${node.id} (${az}, ${node.address}) ${spare ? "stopped (spare slot)" : node.running ? "up" : "stopped (standby)"}`);
  };
  await pool(placement, 3, (az) => startOne(az, false));
  // Spare slots after every node: their numbers follow the AZ's nodes'.
  await pool(spareSlots, 3, (az) => startOne(az, true));
  nodes.sort((a, b) => a.id.localeCompare(b.id));
  spares.sort((a, b) => a.id.localeCompare(b.id));
  // Stopped before the nodes (last tracked, first stopped): no boot starts behind the clean-up.
  const started = cloud;
  if (started) o.track(() => started.stop());
  const [port, monitorPort, azHealthPort] = [await freePort(), await freePort(), await freePort()];
  const azs: DrillAz[] = names.map((name, i) => ({ name, address: `127.0.0.${i + 2}`, standby: i === azCount - 1 && azCount > 2, haproxy: null, proxy: "", index: i }));
  // A pod is in its headless Service from the moment it exists (publishNotReadyAddresses):
  // a node is in DNS unless its group is scaled to zero.
  const inService = (n: SimNode): boolean => n.running || (cloud !== null && cloud.powerOf(n.id) !== "stopped");
  const records = (az: string): string[] => hosts.filter((n) => n.az === az && inService(n)).map((n) => n.address);
  // As Route53 in production, PowerDNS checks each AZ proxy's own `/az/health` listener; it also
  // serves each AZ's node records, which the proxies resolve. Started first: the proxies need it.
  // As infra/dns.ts: one weighted answer per AZ, weighted by its configured capacity (its
  // nodes, the standby's included: asleep, its /az/health fails and takes it out).
  const weighted = azs.map((a) => ({ address: a.address, weight: nodes.filter((n) => n.az === a.name).length }));
  o.progress(`starting PowerDNS (LUA ifurlup over /az/health on :${azHealthPort}, weighted ${weighted.map((w) => `${w.address}=${w.weight}`).join(" ")}; node records ${names.map(nodesRecord).join(", ")})`);
  const dns = await startPdns({
    zone: DRILL_ZONE,
    weighted,
    healthPort: azHealthPort,
    records: Object.fromEntries(names.map((az) => [nodesRecord(az), records(az)])),
    // Measured: 0.8 s on a quiet host, over 10 s while the shared 2-core host ran at load 30+.
    startTimeoutMs: 30_000,
  });
  o.track(() => dns.stop());
  // Every slot an AZ's nodes may fill, its spare slots included (a surge's node is in DNS from its boot).
  const groups = new Map(names.map((az) => [az, nodeGroup(az, hosts.filter((n) => n.az === az).length, nodePorts)] as const));
  const edge = await startDrillEdge(o, redis.url, cluster, () => azs.flatMap((a) => (a.haproxy?.mapSocket ? [a.haproxy.mapSocket] : [])));
  const configs = new Map<DrillAz, HaproxyProxy>();
  const relayPorts = { relay: await freePort(), upstream: await freePort() };
  for (const az of azs) {
    const p = { ...azProxy(az, port, groups, azHealthPort, edge.config), continuation: drillRelayConfig(az.address, relayPorts) };
    az.proxy = backendOf(p.name);
    configs.set(az, p);
  }
  const startAzProxy = async (az: DrillAz): Promise<void> => {
    // The proxy connects to servers from its AZ's address, so a link cut can tell its AZ's traffic apart.
    const args = { proxies: [configs.get(az)!], monitorBind: `${az.address}:${monitorPort}`, prometheusExporter: true, nameservers: [`127.0.0.1:${dns.port}`] };
    const h = await startHaproxyWith((statsSocket, mapSocket) => connectFrom(renderHaproxyConfig({ ...args, statsSocket, mapSocket }), az.address));
    az.haproxy = h;
    o.track(() => h.stop());
  };
  o.progress(`starting ${azCount} HAProxy (one per AZ, on ${azs.map((a) => a.address).join(", ")}:${port}; server-template + resolvers) and the baselines`);
  for (const az of azs) await startAzProxy(az);
  // The relays start last (a tsx start is slow on a loaded host, and the other engines have
  // start limits); until one is up its proxy sends completions straight to the servers.
  o.progress(`starting ${azCount} llm-ha continue (one per AZ proxy, :${relayPorts.relay} → :${relayPorts.upstream})`);
  await Promise.all(azs.map((az) => startDrillRelay(az.address, relayPorts, o.dir, az.name, (stop) => o.track(stop))));
  edge.sync.start();
  const baselinePorts = { default: await freePort(), tuned: await freePort() };
  const baseline = await startHaproxy({ proxies: baselineProxies(baselinePorts, nodes) });
  o.track(() => baseline.stop());
  const byAddress = new Map(hosts.map((n) => [n.address, n]));
  const agentEnv = new AgentEnvSwitch(hosts, o.agentEnv ?? null, o.progress);
  const proxyKills: { at: number; via: string }[] = [];
  cloud?.instances.attach(nodes, spares);
  if (cloud) cloud.instances.bootMs = DRILL_BOOT_MS;
  cloud?.attach(
    hosts,
    () => azs.map((a) => ({ haproxy: a.haproxy, proxy: a.proxy, serversOf: (az: string) => slotNames(groups.get(az)!) })),
    (az) => dns.setRecords(nodesRecord(az), records(az)),
  );
  return {
    cluster,
    tokenDir,
    edge: { store: edge.store, sync: edge.sync, sink: edge.sink, reseed: edge.reseed },
    redis,
    redisAs,
    azs,
    placement: placeMembers(names),
    redisPaths: paths,
    nodes,
    spares,
    baseline,
    baselinePorts,
    dns,
    port,
    monitorPort,
    azHealthPort,
    nodePorts,
    standby: azs.find((a) => a.standby) ?? null,
    cloud,
    running: () => nodes.filter((n) => n.running),
    setAgentEnv: async (env) => {
      const before = agentEnv.current;
      const ok = await agentEnv.set(env);
      // Each restarted agent leaves the registry for a moment, its AZ is DEGRADED meanwhile, and the leader of the old
      // settings may wake the standby: with another capacity engine after the change nobody would release that wake.
      // The drill puts the standby back at zero itself, so the next scenario starts from the scaled-to-zero fleet.
      const sb = azs.find((a) => a.standby);
      if (agentEnv.current !== before && cloud && sb && nodes.some((n) => n.az === sb.name && cloud.powerOf(n.id) !== "stopped")) {
        o.progress(`  the agents' restart woke the standby ${sb.name} (an AZ DEGRADED while its agent restarted): the drill stops it again`);
        cloud.standDown(sb.name);
        await cloud.settled(sb.name);
      }
      return ok;
    },
    azOf: (n) => azs.find((a) => a.name === n.az)!,
    nodeAt: (addr) => byAddress.get(addr.replace(/:\d+$/, "")) ?? null,
    pids: () =>
      [...redis.pids(), dns.pid, baseline.pid, ...azs.map((a) => a.haproxy?.pid ?? -1), ...hosts.flatMap((n) => [n.agentPid ?? -1, n.inferencePid ?? -1])].filter((p) => p > 0),
    deaths: () => [
      ...proxyKills,
      ...hosts.flatMap((n) => n.inferenceExits.filter((e) => !e.planned).map((e) => ({ at: e.at, server: `${n.address}:${n.inferencePort}` }))),
    ],
    killAzProxy: (az) => {
      if (az.haproxy) proxyKills.push({ at: Date.now(), via: az.address });
      az.haproxy?.kill("SIGKILL");
      const h = az.haproxy;
      az.haproxy = null;
      void h?.stop();
    },
    startAzProxy,
    stop: async () => {
      await cloud?.stop();
      await Promise.allSettled([dns.stop(), baseline.stop(), ...azs.map((a) => a.haproxy?.stop())]);
      await Promise.allSettled(hosts.map((n) => n.stop()));
      await paths?.close();
      await redis.stop();
    },
  };
}
