/**
 * Which GPU nodes exist and in which AZ, from a source no GPU node can write: the Kubernetes
 * API's Node objects (the GPU-labelled ones, AZ from `topology.kubernetes.io/zone`), read by
 * the leader with its own ServiceAccount. Node agents hold Redis credentials that let them
 * write shared keys; what they write there is no longer what says a node exists, which AZ it
 * is in, or how many GPUs it should have: the inventory does.
 *
 * One interface, two sources that speak the same API: the cluster's API server (in-cluster
 * URL, CA and token files at the standard paths) and the drill's local cloud, which serves
 * `GET /api/v1/nodes` on loopback for the simulated nodes that are booted.
 */
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

/** One GPU node as the inventory knows it. */
export interface InventoryNode {
  /** The Node's name: the agent's `LLMHA_NODE_ID` (the manifests set it from `spec.nodeName`). */
  nodeId: string;
  az: string;
  /** The cloud instance id (the last part of `spec.providerID`), when the Node has one. */
  instanceId?: string;
  /** GPUs the node has (`status.capacity["nvidia.com/gpu"]`), when the device plugin reports them. */
  gpus?: number;
}

export interface Inventory {
  /** Where it reads from, for logs (never a credential). */
  readonly source: string;
  /** Every GPU node now; throws when the source does not answer (the caller keeps its last list). */
  list(): Promise<InventoryNode[]>;
}

export class InventoryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InventoryError";
  }
}

/** The zone label Kubernetes and every cloud provider set on a Node. */
export const ZONE_LABEL = "topology.kubernetes.io/zone";
/** The GPU label the stack sets on its GPU nodes (infra/names.ts `LABELS.gpuClass`): only these are inventory. */
export const DEFAULT_GPU_SELECTOR = "llm-ha.io/gpu-class";
/** The standard in-cluster ServiceAccount paths. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** Most nodes one list takes: a larger answer is refused rather than read whole. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const NAME = /^[A-Za-z0-9_.-]{1,253}$/;

interface KubeNode {
  metadata?: { name?: unknown; labels?: Record<string, unknown> };
  spec?: { providerID?: unknown };
  status?: { capacity?: Record<string, unknown> };
}

/**
 * A Kubernetes `NodeList` as inventory nodes. A Node without a name or zone label is left out
 * (it cannot be placed); so is one whose name or zone is not a plain name.
 */
export function parseNodeList(body: unknown): InventoryNode[] {
  const items = (body as { kind?: unknown; items?: unknown } | null)?.items;
  if (!Array.isArray(items)) throw new InventoryError("the answer is not a NodeList (no items)");
  const out: InventoryNode[] = [];
  for (const raw of items as KubeNode[]) {
    const name = raw?.metadata?.name;
    const az = raw?.metadata?.labels?.[ZONE_LABEL];
    if (typeof name !== "string" || typeof az !== "string" || !NAME.test(name) || !NAME.test(az)) continue;
    const n: InventoryNode = { nodeId: name, az };
    const provider = raw.spec?.providerID;
    if (typeof provider === "string" && provider) n.instanceId = provider.split("/").pop() || undefined;
    const gpus = Number(raw.status?.capacity?.["nvidia.com/gpu"]);
    if (Number.isInteger(gpus) && gpus > 0 && gpus <= 64) n.gpus = gpus;
    out.push(n);
  }
  return out;
}

export interface KubeInventoryOptions {
  /** API server base URL (`https://kubernetes.default.svc`, or the drill's local cloud). */
  url: string;
  /** Label selector of the GPU nodes. */
  selector: string;
  /** Bearer token file (re-read on every list: kubelet rotates it); null for none. */
  tokenFile: string | null;
  /** CA bundle of the API server (https only); null for the system CAs. */
  caFile: string | null;
  timeoutMs?: number;
}

/** The Node list of a Kubernetes API (or anything serving `/api/v1/nodes` the same way). */
export class KubeInventory implements Inventory {
  readonly source: string;

  constructor(private readonly o: KubeInventoryOptions) {
    this.source = `${o.url}/api/v1/nodes?labelSelector=${o.selector}`;
  }

  /** In a pod: the API server from `KUBERNETES_SERVICE_HOST`/`_PORT`, the ServiceAccount's token and CA. */
  static inCluster(env: NodeJS.ProcessEnv, selector: string, tokenFile: string, caFile: string): KubeInventory {
    const host = env.KUBERNETES_SERVICE_HOST;
    const port = env.KUBERNETES_SERVICE_PORT ?? "443";
    if (!host) throw new InventoryError("LLMHA_INVENTORY=kubernetes needs KUBERNETES_SERVICE_HOST (set in every pod): not running in a cluster?");
    const h = host.includes(":") ? `[${host}]` : host;
    return new KubeInventory({ url: `https://${h}:${port}`, selector, tokenFile, caFile });
  }

  async list(): Promise<InventoryNode[]> {
    const url = new URL(`${this.o.url}/api/v1/nodes`);
    url.searchParams.set("labelSelector", this.o.selector);
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.o.tokenFile) headers.authorization = `Bearer ${readFileSync(this.o.tokenFile, "utf8").trim()}`;
    const ca = url.protocol === "https:" && this.o.caFile ? readFileSync(this.o.caFile) : undefined;
    const body = await getJson(url, headers, ca, this.o.timeoutMs ?? 5000);
    return parseNodeList(body);
  }
}

/** GET a JSON document (the node list, the issuer's keys) with an optional bearer token and CA. */
export function getJson(url: URL, headers: Record<string, string>, ca: Buffer | undefined, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, { method: "GET", headers, ca, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) req.destroy(new InventoryError(`node list larger than ${MAX_BODY_BYTES} bytes`));
        else chunks.push(c);
      });
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        if ((res.statusCode ?? 0) !== 200) return reject(new InventoryError(`GET ${url.pathname}: HTTP ${res.statusCode} ${text.slice(0, 200)}`));
        try {
          resolve(JSON.parse(text));
        } catch {
          reject(new InventoryError(`GET ${url.pathname}: the answer is not JSON`));
        }
      });
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new InventoryError(`GET ${url.pathname}: no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end();
  });
}

/** A fixed list (tests, the bench). */
export class StaticInventory implements Inventory {
  readonly source = "static";
  constructor(public nodes: InventoryNode[]) {}
  async list(): Promise<InventoryNode[]> {
    return this.nodes.map((n) => ({ ...n }));
  }
}

/** `LLMHA_INVENTORY` as an inventory: `none` → null, `kubernetes` → in-cluster, an http(s) URL → that API. */
export function inventoryFromSetting(
  setting: string,
  o: { selector: string; tokenFile: string; caFile: string; env: NodeJS.ProcessEnv },
): Inventory | null {
  if (setting === "none") return null;
  if (setting === "kubernetes") return KubeInventory.inCluster(o.env, o.selector, o.tokenFile, o.caFile);
  const u = new URL(setting);
  return new KubeInventory({ url: setting.replace(/\/+$/, ""), selector: o.selector, tokenFile: u.protocol === "https:" ? o.tokenFile : null, caFile: u.protocol === "https:" ? o.caFile : null });
}
