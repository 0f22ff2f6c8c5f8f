/**
 * The drill's stand-in for the Kubernetes API the leader reads, served by the local cloud
 * (local-cloud.ts) on its port:
 *
 * - `GET /api/v1/nodes?labelSelector=`: the GPU nodes that exist (booted, booting or stopping:
 *   not stopped) as a `NodeList` (name, zone label, GPU capacity, providerID `aws:///<az>/<instance
 *   id>`, `unschedulable` while cordoned): the leader's inventory (`LLMHA_INVENTORY`), as the API
 *   server's Node objects are on AWS;
 * - `GET /openid/v1/jwks`: the ServiceAccount issuer's public keys (`LLMHA_IDENTITY_JWKS`), which
 *   sign each node's projected token (`mintToken`, a file per node the agent enrols with).
 */
import type { SimNode } from "../sim/sim-node";
import { LocalIssuer } from "./local-issuer";

export class LocalKubeApi {
  /** The nodes the inventory lists from; null until `serveInventory` (the list then answers 503). */
  private nodes: SimNode[] | null = null;
  private readonly tokens: LocalIssuer;

  /**
   * `url`: the issuer (`iss`) of the tokens it mints, the local cloud's own URL; `exists`: whether
   * a node exists now (the cloud's power state: a stopped standby node is not a Node); `describe`:
   * its instance id and cordon (the local cloud's instances).
   */
  constructor(
    private readonly url: () => string,
    private readonly exists: (n: SimNode) => boolean,
    private readonly describe: (n: SimNode) => { instanceId: string; unschedulable: boolean } = (n) => ({ instanceId: `i-${n.id}`, unschedulable: false }),
  ) {
    this.tokens = new LocalIssuer(url);
  }

  /** The issuer (`iss`) of the tokens it mints. */
  get issuer(): string {
    return this.url();
  }

  /** Lists these nodes (every node the drill starts; the array may fill later). */
  serveInventory(nodes: SimNode[]): void {
    this.nodes = nodes;
  }

  /** Writes node `nodeId`'s projected token to `path` (local-issuer.ts). */
  mintToken(nodeId: string, path: string, ttlS?: number): Promise<void> {
    return this.tokens.mintToken(nodeId, path, ttlS);
  }

  /** The nodes that exist now, as a Kubernetes `NodeList`. */
  nodeList(): object {
    return {
      kind: "NodeList",
      apiVersion: "v1",
      items: (this.nodes ?? []).filter(this.exists).map((n) => ({
        metadata: { name: n.id, labels: { "topology.kubernetes.io/zone": n.az, "llm-ha.io/gpu-class": "sim" } },
        spec: ((d) => ({ providerID: `aws:///${n.az}/${d.instanceId}`, ...(d.unschedulable ? { unschedulable: true } : {}) }))(this.describe(n)),
        status: { capacity: { "nvidia.com/gpu": String(n.gpuCount) } },
      })),
    };
  }

  /** The answer to `GET path` (query removed), or null when the path is not one of its routes. */
  answer(path: string): { code: number; body: object } | null {
    if (path === "/openid/v1/jwks") return { code: 200, body: { keys: this.tokens.keys() } };
    if (path !== "/api/v1/nodes") return null;
    if (!this.nodes) return { code: 503, body: { error: "local cloud not ready: the drill is still starting its nodes" } };
    return { code: 200, body: this.nodeList() };
  }
}
