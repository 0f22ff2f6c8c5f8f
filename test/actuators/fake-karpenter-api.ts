/**
 * A small fake Kubernetes API on loopback for the Karpenter engine's tests: NodePools (GET, merge
 * PATCH), NodeClaims (listed by `karpenter.sh/nodepool` label, DELETE), and one Deployment's
 * scale (`llm-ha/llm-ha-standby-placeholder`). `deny` makes every path containing it answer 403.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- Kubernetes objects are untyped JSON here

export const GPU = "nvidia.com/gpu";
export const PLACEHOLDER_SCALE = "/apis/apps/v1/namespaces/llm-ha/deployments/llm-ha-standby-placeholder/scale";

function merge(t: O, p: O): void {
  for (const [k, v] of Object.entries(p)) {
    if (v === null) delete t[k];
    else if (typeof v === "object" && !Array.isArray(v)) merge((t[k] ??= {}), v as O);
    else t[k] = v;
  }
}

export class FakeKarpenterApi {
  pools = new Map<string, O>();
  claims = new Map<string, O>();
  scale = { replicas: 0 };
  deny: string | null = null;
  readonly calls: { method: string; path: string; type?: string; body: O | null }[] = [];
  url = "";
  private server: Server | null = null;

  async start(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    this.server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    return new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  /** Empty pools (limits "0") with these names, no claims, the placeholder at 0. */
  reset(pools: string[]): void {
    this.pools = new Map(pools.map((name) => [name, { metadata: { name, annotations: {} }, spec: { limits: { [GPU]: "0" } } }]));
    this.claims = new Map();
    this.scale = { replicas: 0 };
    this.deny = null;
    this.calls.length = 0;
  }

  /** A NodeClaim of `pool` with conditions `[type, status, reason?, message?]`, all stamped `at`. */
  claim(name: string, pool: string, conds: [string, string, string?, string?][], at = Date.now()): void {
    this.claims.set(name, {
      metadata: { name, labels: { "karpenter.sh/nodepool": pool }, creationTimestamp: new Date(at).toISOString() },
      status: { conditions: conds.map(([type, status, reason, message]) => ({ type, status, reason: reason ?? "", message: message ?? "", lastTransitionTime: new Date(at).toISOString() })) },
    });
  }

  /** Non-GET requests, as `METHOD path`. */
  writes(): string[] {
    return this.calls.filter((c) => c.method !== "GET").map((c) => `${c.method} ${c.path}`);
  }

  private async handle(req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const body = text ? (JSON.parse(text) as O) : null;
    const u = new URL(req.url ?? "/", "http://x");
    this.calls.push({ method: req.method ?? "", path: u.pathname + u.search, type: req.headers["content-type"], body });
    res.setHeader("content-type", "application/json");
    const reply = (code: number, b: unknown): void => void ((res.statusCode = code), res.end(JSON.stringify(b)));
    if (this.deny && u.pathname.includes(this.deny)) return reply(403, { kind: "Status", message: `forbidden: cannot ${req.method} ${this.deny}`, code: 403 });
    const np = /^\/apis\/karpenter\.sh\/v1\/nodepools\/([^/]+)$/.exec(u.pathname);
    if (np) {
      const p = this.pools.get(np[1]);
      if (!p) return reply(404, { kind: "Status", message: "not found", code: 404 });
      if (req.method === "PATCH") merge(p, body!);
      return reply(200, p);
    }
    if (u.pathname === "/apis/karpenter.sh/v1/nodeclaims") {
      const want = (u.searchParams.get("labelSelector") ?? "").split("=")[1];
      return reply(200, { items: [...this.claims.values()].filter((c) => c.metadata.labels["karpenter.sh/nodepool"] === want) });
    }
    const nc = /^\/apis\/karpenter\.sh\/v1\/nodeclaims\/([^/]+)$/.exec(u.pathname);
    if (nc && req.method === "DELETE") return this.claims.delete(nc[1]) ? reply(200, {}) : reply(404, { message: "not found" });
    if (u.pathname === PLACEHOLDER_SCALE) {
      if (req.method === "PATCH") this.scale.replicas = body!.spec.replicas as number;
      return reply(200, { spec: { replicas: this.scale.replicas } });
    }
    reply(404, { message: `no route ${u.pathname}` });
  }
}
