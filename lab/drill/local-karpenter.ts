/**
 * A small simulated Karpenter, served by the local cloud (local-cloud.ts) on the Kubernetes
 * paths the leader's Karpenter engine calls (agent/src/fleet/actuators/karpenter/standby.ts):
 *
 * | request | what it does |
 * |---|---|
 * | `GET /apis/karpenter.sh/v1/nodepools/NAME` | the NodePool: `spec.limits["nvidia.com/gpu"]`, annotations, labels |
 * | `PATCH /apis/karpenter.sh/v1/nodepools/NAME` | JSON merge patch of its metadata and spec (a `null` removes a key) |
 * | `GET /apis/karpenter.sh/v1/nodeclaims?labelSelector=karpenter.sh/nodepool=NAME` | the pool's NodeClaims with their conditions |
 * | `DELETE /apis/karpenter.sh/v1/nodeclaims/NAME` | the claim's node drained and stopped (Karpenter's termination) |
 * | `GET`/`PATCH /apis/apps/v1/namespaces/NS/deployments/NAME/scale` | the placeholder Deployment's replicas |
 *
 * What it provisions: every 250 ms, each placeholder pod with no node (replicas less the live
 * NodeClaims) gets a NodeClaim in the first pool, in the order defined, whose GPU limit has room
 * for one more node, that has a stopped node of its AZ to boot and that did not fail a launch in
 * the last 3 min (Karpenter's unavailable-offerings cache). A claim launches 1 s after it is made:
 * with an ICE fault on the pool its `Launched` turns False with reason `InsufficientCapacity` and
 * AWS's message (the claim kept 10 s, then deleted; its node free for another pool); else `Launched` True
 * and the node boots as the Auto Scaling path boots it (`Registered` and `Initialized` True once
 * it runs). Pools are taken from `definePools`; none defined: every path answers 404.
 */

import type { IncomingMessage } from "node:http";

/** A simulated node Karpenter can boot (the local cloud's SimNode). */
export interface KarpenterNode {
  readonly id: string;
  readonly az: string;
  readonly gpuCount: number;
}

export interface LocalKarpenterDeps<N extends KarpenterNode> {
  /** Every node of the AZ Karpenter may boot (the standby AZ's). */
  nodesIn(az: string): N[];
  /** True while the node is stopped (free to provision). */
  isStopped(n: N): boolean;
  running(n: N): boolean;
  boot(n: N): void;
  halt(n: N): void;
  /** Drill clock, for the request log. */
  now(): number;
  log?(line: string): void;
  /** AWS's capacity message for the type in the AZ. */
  capacityMessage(instanceType: string, az: string): string;
}

export interface SimNodePool {
  name: string;
  az: string;
  instanceType: string;
}

interface Pool extends SimNodePool {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  limits: Record<string, string>;
  ice: boolean;
  lastFailAt: number;
}

interface Claim {
  name: string;
  pool: string;
  nodeId: string;
  createdAt: number;
  launched: "Unknown" | "True" | "False";
  launchedAt: number | null;
  message: string;
}

/** One request the sim answered, for the drill's figures. */
export interface KarpenterRequest {
  t: number;
  method: string;
  path: string;
  body: unknown;
  code: number;
}

export interface LocalKarpenterTiming {
  /** A NodeClaim launches (or fails) this long after it is made. */
  launchMs: number;
  /** A failed NodeClaim is kept this long, then deleted. */
  retryMs: number;
  /** A pool whose launch failed is not tried again for this long (Karpenter's unavailable-offerings cache: 3 min). */
  iceCacheMs: number;
  tickMs: number;
}

export const KARPENTER_TIMING: LocalKarpenterTiming = Object.freeze({ launchMs: 1000, retryMs: 10_000, iceCacheMs: 180_000, tickMs: 250 });

type O = Record<string, unknown>;
const iso = (ms: number): string => new Date(ms).toISOString();
const GPU = "nvidia.com/gpu";

/** RFC 7386 merge patch. */
function mergePatch(target: O, patch: O): void {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else if (typeof v === "object" && !Array.isArray(v)) {
      if (typeof target[k] !== "object" || target[k] === null) target[k] = {};
      mergePatch(target[k] as O, v as O);
    } else target[k] = v;
  }
}

export class LocalKarpenter<N extends KarpenterNode> {
  readonly requests: KarpenterRequest[] = [];
  readonly launchFailures: { t: number; pool: string; message: string }[] = [];
  private pools: Pool[] = [];
  private readonly claims = new Map<string, Claim>();
  private placeholder: { namespace: string; name: string; replicas: number } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private seq = 0;

  constructor(
    private readonly d: LocalKarpenterDeps<N>,
    private readonly timing: LocalKarpenterTiming = KARPENTER_TIMING,
  ) {}

  /** The pools (in provisioning order, limits 0) and the placeholder Deployment (0 replicas); `[]` removes them. */
  definePools(pools: SimNodePool[], placeholder?: { namespace: string; name: string }): void {
    this.pools = pools.map((p) => ({ ...p, labels: { "llm-ha.io/az": p.az, "llm-ha.io/role": "standby" }, annotations: {}, limits: { [GPU]: "0" }, ice: false, lastFailAt: 0 }));
    this.placeholder = placeholder ? { ...placeholder, replicas: 0 } : null;
    if (pools.length && !this.timer) {
      this.timer = setInterval(() => this.tick(), this.timing.tickMs);
      this.timer.unref();
    }
    if (!pools.length) this.stop();
  }

  /** Launches in `pool` fail with InsufficientCapacity while on. */
  iceFault(pool: string, on = true): void {
    const p = this.pools.find((x) => x.name === pool);
    if (!p) throw new Error(`no NodePool ${pool}`);
    p.ice = on;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** The answer to a request on its paths, or null when the path is not one of them. */
  answer(method: string, url: string, body: unknown): { code: number; body: object } | null {
    const u = new URL(url, "http://x");
    const path = u.pathname;
    if (!path.startsWith("/apis/karpenter.sh/v1/") && !/^\/apis\/apps\/v1\/namespaces\/[^/]+\/deployments\/[^/]+\/scale$/.test(path)) return null;
    const r = this.route(method, path, u.searchParams, body);
    this.requests.push({ t: this.d.now(), method, path: `${path}${u.search}`, body, code: r.code });
    if (method !== "GET") this.d.log?.(`karpenter: ${method} ${path} ${body ? JSON.stringify(body) : ""} → ${r.code}`);
    return r;
  }

  private route(method: string, path: string, q: URLSearchParams, body: unknown): { code: number; body: object } {
    const notFound = (what: string): { code: number; body: object } => ({ code: 404, body: { kind: "Status", status: "Failure", reason: "NotFound", message: `${what} not found`, code: 404 } });
    const pool = /^\/apis\/karpenter\.sh\/v1\/nodepools\/([^/]+)$/.exec(path);
    if (pool) {
      const p = this.pools.find((x) => x.name === decodeURIComponent(pool[1]));
      if (!p) return notFound(`nodepools.karpenter.sh "${pool[1]}"`);
      if (method === "PATCH") {
        const obj: O = { metadata: { annotations: p.annotations }, spec: { limits: p.limits } };
        mergePatch(obj, (body ?? {}) as O);
        p.annotations = ((obj.metadata as O).annotations ?? {}) as Record<string, string>;
        p.limits = (((obj.spec as O).limits ?? {}) as Record<string, unknown>) as Record<string, string>;
        for (const [k, v] of Object.entries(p.limits)) p.limits[k] = String(v);
      } else if (method !== "GET") return { code: 405, body: { message: `${method} not allowed` } };
      return { code: 200, body: this.poolObject(p) };
    }
    if (path === "/apis/karpenter.sh/v1/nodeclaims" && method === "GET") {
      const m = /^karpenter\.sh\/nodepool=(.+)$/.exec(q.get("labelSelector") ?? "");
      const items = [...this.claims.values()].filter((c) => !m || c.pool === m[1]).map((c) => this.claimObject(c));
      return { code: 200, body: { apiVersion: "karpenter.sh/v1", kind: "NodeClaimList", items } };
    }
    const claim = /^\/apis\/karpenter\.sh\/v1\/nodeclaims\/([^/]+)$/.exec(path);
    if (claim && method === "DELETE") {
      const c = this.claims.get(decodeURIComponent(claim[1]));
      if (!c) return notFound(`nodeclaims.karpenter.sh "${claim[1]}"`);
      this.claims.delete(c.name);
      if (c.launched === "True") {
        const n = this.node(c);
        if (n) this.d.halt(n);
      }
      return { code: 200, body: this.claimObject(c) };
    }
    const scale = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/deployments\/([^/]+)\/scale$/.exec(path);
    if (scale) {
      const ph = this.placeholder;
      if (!ph || ph.namespace !== scale[1] || ph.name !== scale[2]) return notFound(`deployments.apps "${scale[2]}"`);
      if (method === "PATCH") {
        const n = Number(((body as O | null)?.spec as O | undefined)?.replicas);
        if (!Number.isInteger(n) || n < 0) return { code: 422, body: { message: "spec.replicas must be a non-negative integer" } };
        ph.replicas = n;
      } else if (method !== "GET") return { code: 405, body: { message: `${method} not allowed` } };
      return { code: 200, body: { apiVersion: "autoscaling/v1", kind: "Scale", metadata: { name: ph.name, namespace: ph.namespace }, spec: { replicas: ph.replicas }, status: { replicas: ph.replicas } } };
    }
    return notFound(path);
  }

  private poolObject(p: Pool): object {
    return {
      apiVersion: "karpenter.sh/v1", kind: "NodePool",
      metadata: { name: p.name, labels: { ...p.labels }, annotations: { ...p.annotations } },
      spec: { limits: { ...p.limits }, template: { metadata: { labels: { ...p.labels } }, spec: { requirements: [{ key: "node.kubernetes.io/instance-type", operator: "In", values: [p.instanceType] }, { key: "topology.kubernetes.io/zone", operator: "In", values: [p.az] }] } } },
    };
  }

  private claimObject(c: Claim): object {
    const n = this.node(c);
    const up = c.launched === "True" && n !== undefined && this.d.running(n);
    const cond = (type: string, status: string, at: number, reason: string, message = ""): O => ({ type, status, reason, message, lastTransitionTime: iso(at) });
    const conditions = [
      c.launched === "False" ? cond("Launched", "False", c.launchedAt ?? c.createdAt, "InsufficientCapacity", c.message) : cond("Launched", c.launched, c.launchedAt ?? c.createdAt, c.launched === "True" ? "Launched" : "AwaitingLaunch"),
      cond("Registered", up ? "True" : "Unknown", c.launchedAt ?? c.createdAt, up ? "Registered" : "AwaitingRegistration"),
      cond("Initialized", up ? "True" : "Unknown", c.launchedAt ?? c.createdAt, up ? "Initialized" : "AwaitingInitialization"),
    ];
    return {
      apiVersion: "karpenter.sh/v1", kind: "NodeClaim",
      metadata: { name: c.name, labels: { "karpenter.sh/nodepool": c.pool }, creationTimestamp: iso(c.createdAt) },
      status: { ...(up ? { nodeName: c.nodeId } : {}), conditions },
    };
  }

  private node(c: Claim): N | undefined {
    const p = this.pools.find((x) => x.name === c.pool);
    return p ? this.d.nodesIn(p.az).find((n) => n.id === c.nodeId) : undefined;
  }

  /** One round: launches due, failed claims retried, pending placeholder pods given claims. */
  tick(now = Date.now()): void {
    for (const c of [...this.claims.values()]) {
      const p = this.pools.find((x) => x.name === c.pool);
      if (!p) continue;
      if (c.launched === "Unknown" && now - c.createdAt >= this.timing.launchMs) {
        c.launchedAt = now;
        if (p.ice) {
          c.launched = "False";
          c.message = this.d.capacityMessage(p.instanceType, p.az);
          p.lastFailAt = now;
          this.launchFailures.push({ t: this.d.now(), pool: p.name, message: c.message });
          this.d.log?.(`karpenter: ${c.name} (${p.name}) launch failed: InsufficientCapacity`);
        } else {
          const n = this.node(c);
          c.launched = "True";
          if (n) this.d.boot(n);
        }
      } else if (c.launched === "False" && now - (c.launchedAt ?? now) >= this.timing.retryMs) this.claims.delete(c.name);
    }
    const ph = this.placeholder;
    if (!ph) return;
    const live = [...this.claims.values()].filter((c) => c.launched !== "False");
    let pending = ph.replicas - live.length;
    for (const p of this.pools) {
      if (pending <= 0) break;
      if (now - p.lastFailAt < this.timing.iceCacheMs) continue;
      const limit = Number(p.limits[GPU] ?? "0") || 0;
      // A failed launch holds no instance: its node is free for another pool.
      const bound = new Set([...this.claims.values()].filter((c) => c.launched !== "False").map((c) => c.nodeId));
      let used = [...this.claims.values()].filter((c) => c.pool === p.name && c.launched !== "False").reduce((a, c) => a + (this.node(c)?.gpuCount ?? 0), 0);
      for (const n of this.d.nodesIn(p.az)) {
        if (pending <= 0 || bound.has(n.id) || !this.d.isStopped(n) || used + n.gpuCount > limit) continue;
        const name = `${p.name}-${(++this.seq).toString(36).padStart(5, "0")}`;
        this.claims.set(name, { name, pool: p.name, nodeId: n.id, createdAt: now, launched: "Unknown", launchedAt: null, message: "" });
        used += n.gpuCount;
        pending -= 1;
        this.d.log?.(`karpenter: ${name} created in ${p.name} for a pending placeholder pod (node ${n.id})`);
      }
    }
  }
}

/** The local cloud's handler for the sim's paths: reads the JSON body, answers as the API server would. */
export async function karpenterStep<N extends KarpenterNode>(k: LocalKarpenter<N>, req: IncomingMessage, send: (code: number, body: object) => void): Promise<void> {
  let body: unknown;
  try {
    let raw = "";
    for await (const chunk of req) raw += String(chunk);
    body = raw ? (JSON.parse(raw) as unknown) : null;
  } catch {
    return send(400, { kind: "Status", status: "Failure", reason: "BadRequest", message: "body must be JSON", code: 400 });
  }
  const r = k.answer(req.method ?? "GET", req.url ?? "/", body);
  if (!r) return send(404, { kind: "Status", status: "Failure", reason: "NotFound", message: `${req.url ?? ""} not found`, code: 404 });
  send(r.code, r.body);
}
