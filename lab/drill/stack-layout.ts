/**
 * The drill world's layout, apart from starting it (stack.ts): names and addresses, each AZ's
 * `server-template` group and proxy as infra renders them, the baselines, and the start-up
 * helpers (a pool of at most N starts at a time, a node start retried on a port race).
 */
import type { HaproxyDnsGroup, HaproxyProxy, HaproxyStaticServer } from "../../contracts/haproxy-config";
import type { HaproxyEdge } from "../../contracts/haproxy-edge";
import type { SimNode, SimNodePorts } from "../sim/sim-node";
import { DRILL_AGENT_TUNING, DRILL_TUNED_BASELINE } from "./settings";

/** Zone of the drill's PowerDNS: the service name and each AZ's node records live in it. */
export const DRILL_ZONE = "llmha.test";
export const BASELINE_DEFAULT = "baseline_default";
export const BASELINE_TUNED = "baseline_tuned";

/** The generator names a proxy's backend `<name>_servers`: where `show stat` lists its server rows. */
export function backendOf(proxy: string): string {
  return `${proxy}_servers`;
}

/** Which AZ each of `n` nodes lands in: round-robin over the AZ names. */
export function placeNodes(n: number, azNames: readonly string[]): string[] {
  return Array.from({ length: n }, (_, i) => azNames[i % azNames.length]);
}

function staticServer(n: SimNode): HaproxyStaticServer {
  return { name: n.id, address: n.address, port: n.inferencePort, agentPort: n.agentCheckPort, httpPort: n.httpPort };
}

/** The loopback address of the `seq`-th node (0-based) of the AZ with this index: 127.1.<az>.<seq + 1>. */
export function nodeAddress(azIndex: number, seq: number): string {
  return `127.1.${azIndex}.${seq + 1}`;
}

/** Name (inside `DRILL_ZONE`) of an AZ's node records: its headless Service. */
export function nodesRecord(az: string): string {
  return `${az}.nodes`;
}

/**
 * The `server-template` group of an AZ's nodes, as infra renders one per headless Service:
 * `slots` servers named `<az>-n1…`, filled from `<az>.nodes.llmha.test`.
 */
export function nodeGroup(az: string, slots: number, ports: SimNodePorts): HaproxyDnsGroup {
  return { prefix: `${az}-n`, fqdn: `${nodesRecord(az)}.${DRILL_ZONE}`, slots, port: ports.inference, agentPort: ports.agentCheck, httpPort: ports.http };
}

/** Server names of a group's slots in HAProxy (`server-template p 1-N` makes p1…pN). */
export function slotNames(g: Pick<HaproxyDnsGroup, "prefix" | "slots">): string[] {
  return Array.from({ length: g.slots }, (_, i) => `${g.prefix}${i + 1}`);
}

/**
 * The proxy of one AZ, rendered as production renders it: its own AZ's group local, every
 * other AZ's group backup, servers found through DNS; `/az/health` forwarded to its agents,
 * on the inference port and, with `azHealthPort`, on a listener of its own.
 */
export function azProxy(az: { name: string; address: string }, port: number, groups: ReadonlyMap<string, HaproxyDnsGroup>, azHealthPort?: number, edge?: HaproxyEdge): HaproxyProxy {
  const local = groups.get(az.name);
  if (!local) throw new Error(`no node group for ${az.name}`);
  return {
    name: `az_${az.name.replace(/[^A-Za-z0-9]/g, "_")}`,
    bind: `${az.address}:${port}`,
    health: "agent",
    forwardAzHealth: true,
    ...(azHealthPort ? { azHealthBind: `${az.address}:${azHealthPort}` } : {}),
    tuning: DRILL_AGENT_TUNING,
    ...(edge ? { edge } : {}),
    servers: { kind: "dns", local, backup: [...groups].filter(([name]) => name !== az.name).map(([, g]) => g) },
  };
}

export function baselineProxies(ports: { default: number; tuned: number }, nodes: readonly SimNode[]): HaproxyProxy[] {
  const servers = { kind: "static" as const, local: nodes.map(staticServer), backup: [] };
  return [
    { name: BASELINE_DEFAULT, bind: `127.0.0.1:${ports.default}`, health: "httpchk-default", servers },
    { name: BASELINE_TUNED, bind: `127.0.0.1:${ports.tuned}`, health: "httpchk-tuned", tuning: DRILL_TUNED_BASELINE, servers },
  ];
}

/**
 * Runs `fn` over `items` with at most `limit` at a time (two cores: don't start 12 Node
 * processes at once). Waits for every started item even when one fails, so nothing
 * starts after the caller has begun cleaning up; then throws the first error.
 */
export async function pool<T>(items: readonly T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown = null;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length && failure === null) {
        const i = next++;
        try {
          await fn(items[i]);
        } catch (err) {
          failure ??= err;
        }
      }
    }),
  );
  if (failure !== null) throw failure;
}

/** Another process can take a port between `freePort()` and the bind: try a node's start a few times. */
export async function startNodeWithRetry(start: () => Promise<SimNode>, tries = 3): Promise<SimNode> {
  for (let i = 1; ; i++) {
    try {
      return await start();
    } catch (err) {
      if (i >= tries) throw err;
    }
  }
}

