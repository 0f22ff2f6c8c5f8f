/**
 * The standby AZ's capacity on Karpenter (`LLMHA_CAPACITY_ENGINE=karpenter`), through the
 * Kubernetes API with the controller's ServiceAccount (kube-client.ts):
 *
 * - wake: the first NodePool's `spec.limits["nvidia.com/gpu"]` raised from `"0"` to its wake
 *   GPUs (`PATCH /apis/karpenter.sh/v1/nodepools/NAME`, merge patch, with the annotation
 *   `llm-ha.io/woken-at`), and the placeholder Deployment scaled to its replicas (`PATCH …/scale`):
 *   its pending GPU pods are what makes Karpenter provision nodes;
 * - the follow (wake-follow.ts, the same decision as Auto Scaling's): the pool's NodeClaims
 *   (`GET /apis/karpenter.sh/v1/nodeclaims?labelSelector=karpenter.sh/nodepool=NAME`) are its
 *   launches: `Initialized` True is a node in service, `Launched` True a node on its way,
 *   `Launched` False a failed launch with Karpenter's reason and message (`InsufficientCapacity`:
 *   class `capacity`). When the pool in charge failed (or none launched within the wake bound)
 *   the next pool of `LLMHA_STANDBY_NODEPOOLS` is raised, one per call;
 * - release: the placeholder to 0, every listed pool's limit back to `"0"`, and their NodeClaims
 *   deleted (`DELETE …/nodeclaims/NAME`: Karpenter drains and terminates the nodes).
 *
 * State lives in the cluster: the wake time is the pool's annotation, so the next leader goes
 * on where this one stopped. Every action reads first and writes only what differs.
 */
import { kubeCall, type KubeApiOptions, type KubeReply } from "../kube-client";
import type { ActionContext, ActionName, ActionResult, CapacityEngine, ForeignAction, WakeReport } from "../types";
import { DEFAULT_WAKE_BOUND_MS, planWake, type WakeGroupView } from "../wake-follow";
import type { StandbyNodePool, StandbyPlaceholder } from "./settings";

/** NodePool annotation: epoch ms of llm-ha's wake of the pool (absent: not woken by llm-ha). */
export const WOKEN_AT_ANNOTATION = "llm-ha.io/woken-at";
export const GPU_RESOURCE = "nvidia.com/gpu";
export const NODEPOOL_LABEL = "karpenter.sh/nodepool";
const KARPENTER = "/apis/karpenter.sh/v1";

export interface KarpenterEngineOptions {
  /** The Kubernetes API (`LLMHA_INVENTORY`'s URL, token and CA). */
  api: KubeApiOptions;
  /** The standby AZ's NodePools in fallback order (`LLMHA_STANDBY_NODEPOOLS`). Empty: wake/release fail with a clear detail. */
  pools: StandbyNodePool[];
  /** The AZ the pools serve (`LLMHA_STANDBY_AZ`); waking another AZ then fails. Default: not checked. */
  standbyAz?: string;
  /** The placeholder Deployment (`LLMHA_STANDBY_PLACEHOLDER`). Default none: something else makes pods pending. */
  placeholder?: StandbyPlaceholder | null;
  /** A raised pool with no node in service this long has failed (`LLMHA_STANDBY_WAKE_BOUND_MS`). Default 900000. */
  wakeBoundMs?: number;
  /** A raised pool with nodes in service but none healthy this long has failed (`LLMHA_STANDBY_HEALTHY_BOUND_MS`). Default 600000. */
  healthyBoundMs?: number;
  /** Wall clock. Default `Date.now`. */
  now?: () => number;
}

/** A Kubernetes API call that failed (HTTP status ≥ 400 other than an expected 404, or no answer). */
export class KarpenterApiError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KarpenterApiError";
  }
}

interface PoolState {
  /** `spec.limits["nvidia.com/gpu"]` as written (absent: no limit). */
  limit: string | undefined;
  wokenAt: number | null;
}

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

interface NodeClaim {
  metadata?: { name?: string; creationTimestamp?: string; deletionTimestamp?: string };
  status?: { conditions?: Condition[] };
}

/** Counts the calls of one action. */
class Calls {
  n = 0;
}

/** A quantity as a number of GPUs (`"8"`, `"0"`; anything else counts as 0). */
const gpusOf = (q: string | undefined): number => (q !== undefined && /^\d+$/.test(q) ? Number(q) : 0);
const condition = (c: NodeClaim, type: string): Condition | undefined => c.status?.conditions?.find((x) => x.type === type);
const msOf = (t: string | undefined): number => (t ? Date.parse(t) || 0 : 0);

export class KarpenterEngine implements CapacityEngine {
  readonly engine = "karpenter";
  private readonly now: () => number;

  constructor(private readonly o: KarpenterEngineOptions) {
    this.now = o.now ?? Date.now;
  }

  wakeStandby(az: string, ctx: ActionContext): Promise<ActionResult> {
    return this.act("standby.wake", az, (calls) => this.wake(az, calls, ctx));
  }

  releaseStandby(az: string, _ctx: ActionContext): Promise<ActionResult> {
    return this.act("standby.release", az, (calls) => this.release(az, calls));
  }

  private async act(action: ActionName, az: string, body: (calls: Calls) => Promise<Omit<ActionResult, "action" | "az" | "calls" | "durationMs">>): Promise<ActionResult> {
    const started = performance.now();
    const calls = new Calls();
    try {
      const r = await body(calls);
      return { action, az, calls: calls.n, durationMs: performance.now() - started, ...r };
    } catch (err) {
      return { action, az, outcome: "failed", calls: calls.n, detail: (err as Error).message, durationMs: performance.now() - started };
    }
  }

  private async wake(az: string, calls: Calls, ctx: ActionContext): Promise<{ outcome: ActionResult["outcome"]; detail: string; wake: WakeReport }> {
    const pools = this.poolsOf(az);
    const states = new Map<string, PoolState>();
    const missing: string[] = [];
    for (const [i, p] of pools.entries()) {
      const s = await this.readPool(calls, p.name);
      if (s) states.set(p.name, s);
      else if (i === 0) throw new KarpenterApiError(`NodePool ${p.name} not found (LLMHA_STANDBY_NODEPOOLS)`);
      else missing.push(p.name);
    }
    const steps = pools.filter((p) => states.has(p.name));
    const views: WakeGroupView[][] = [];
    for (const p of steps) {
      const s = states.get(p.name)!;
      const woken = s.wokenAt !== null;
      const view: WakeGroupView = { name: p.name, woken, wokenAt: s.wokenAt, inService: 0, pending: 0, failures: [] };
      // Launches are read only for the pools raised by llm-ha.
      if (woken) Object.assign(view, this.launches(await this.listClaims(calls, p.name), s.wokenAt));
      views.push([view]);
    }
    const plan = planWake(views, { boundMs: this.o.wakeBoundMs ?? DEFAULT_WAKE_BOUND_MS, healthyBoundMs: this.o.healthyBoundMs }, this.now(), ctx.wakeHealth);
    const top = views.reduce((t, row, i) => (row[0].woken ? i : t), -1);
    const upTo = Math.max(top, plan.wake ?? -1, 0);
    const changes: string[] = [];
    for (let i = 0; i <= upTo; i++) {
      const change = await this.raise(calls, steps[i], states.get(steps[i].name)!);
      if (change) changes.push(change);
    }
    // A placeholder that cannot be scaled fails the action, but the pools and the follow stand:
    // the report goes out (other pending pods may still provision; the wake bound judges it).
    let placeholderError: string | null = null;
    try {
      const scaled = await this.scalePlaceholder(calls, this.o.placeholder?.replicas ?? 0, "up");
      if (scaled) changes.push(scaled);
    } catch (err) {
      if (!(err instanceof KarpenterApiError)) throw err;
      placeholderError = err.message;
    }
    const note = missing.length ? ` (fallback NodePool${missing.length > 1 ? "s" : ""} ${missing.join(", ")} not found: skipped)` : "";
    if (plan.report.phase === "unavailable" || placeholderError) {
      return { outcome: "failed", detail: `${[...changes, plan.detail, ...(placeholderError ? [`placeholder not scaled: ${placeholderError}`] : [])].join("; ")}${note}`, wake: plan.report };
    }
    if (changes.length === 0) {
      const held = steps.slice(0, upTo + 1).map((p) => `${p.name} ${GPU_RESOURCE} ≥ ${p.gpus}`).join(", ");
      return { outcome: "already", detail: `${held}; ${plan.detail}${note}`, wake: plan.report };
    }
    return { outcome: "applied", detail: `${changes.join("; ")}; ${plan.detail}${note}`, wake: plan.report };
  }

  /** One pool to its wake GPUs (a higher limit set by someone else is kept), the wake time recorded; null when nothing differed. */
  private async raise(calls: Calls, p: StandbyNodePool, cur: PoolState): Promise<string | null> {
    // No limit at all is no cap: nothing to raise (a limit written now would lower it).
    const raise = cur.limit !== undefined && gpusOf(cur.limit) < p.gpus;
    if (!raise && cur.wokenAt !== null) return null;
    const patch: Record<string, unknown> = { metadata: { annotations: { [WOKEN_AT_ANNOTATION]: String(cur.wokenAt ?? this.now()) } } };
    if (raise) patch.spec = { limits: { [GPU_RESOURCE]: String(p.gpus) } };
    await this.patchPool(calls, p.name, patch);
    return `${p.name} ${raise ? `${GPU_RESOURCE} limit ${cur.limit ?? "none"}→${p.gpus}` : "limit kept, wake recorded"}`;
  }

  private async release(az: string, calls: Calls): Promise<{ outcome: ActionResult["outcome"]; detail: string }> {
    const pools = this.poolsOf(az);
    const changes: string[] = [];
    // The placeholder first: no new pending pods; then the limits: no new nodes; then the nodes.
    const scaled = await this.scalePlaceholder(calls, 0, "down");
    if (scaled) changes.push(scaled);
    const seen: string[] = [];
    for (const p of pools) {
      const cur = await this.readPool(calls, p.name);
      if (!cur) continue;
      seen.push(p.name);
      if (cur.limit !== "0" || cur.wokenAt !== null) {
        await this.patchPool(calls, p.name, { metadata: { annotations: { [WOKEN_AT_ANNOTATION]: null } }, spec: { limits: { [GPU_RESOURCE]: "0" } } });
        changes.push(`${p.name} ${GPU_RESOURCE} limit ${cur.limit ?? "none"}→0`);
      }
      const claims = (await this.listClaims(calls, p.name)).filter((c) => !c.metadata?.deletionTimestamp && c.metadata?.name);
      for (const c of claims) await this.deleteClaim(calls, c.metadata!.name!);
      if (claims.length) changes.push(`${p.name}: NodeClaim${claims.length > 1 ? "s" : ""} ${claims.map((c) => c.metadata!.name).join(", ")} deleted`);
    }
    if (changes.length === 0) return { outcome: "already", detail: `${seen.join(", ") || "no NodePool found"}: limits 0, no NodeClaims${this.o.placeholder ? ", placeholder at 0" : ""}` };
    return { outcome: "applied", detail: changes.join("; ") };
  }

  /**
   * Standby capacity no llm-ha wake explains (reads only; foreign.ts reports it, never undoes it):
   * a listed pool whose GPU limit is above 0 (or absent: no limit) with no `llm-ha.io/woken-at`
   * annotation, a woken pool raised past its wake GPUs, the placeholder scaled up with no pool woken.
   */
  async audit(): Promise<ForeignAction[]> {
    const calls = new Calls();
    const az = this.o.standbyAz ?? null;
    const out: ForeignAction[] = [];
    let woken = false;
    for (const p of this.o.pools) {
      const cur = await this.readPool(calls, p.name);
      if (!cur) continue;
      const seen = (why: string): void => void out.push({ kind: "standby", id: `${p.name}:${cur.limit ?? "none"}:${cur.wokenAt === null ? "asleep" : "woken"}`, az, detail: `NodePool ${p.name} ${GPU_RESOURCE} limit ${cur.limit ?? "none"}: ${why}` });
      if (cur.wokenAt !== null) {
        woken = true;
        if (gpusOf(cur.limit) > p.gpus || cur.limit === undefined) seen(`raised past its wake (${p.gpus})`);
      } else if (cur.limit === undefined || gpusOf(cur.limit) > 0) seen(`above 0 with no llm-ha wake (no ${WOKEN_AT_ANNOTATION} annotation)`);
    }
    const ph = this.o.placeholder;
    if (ph && !woken) {
      const path = `/apis/apps/v1/namespaces/${encodeURIComponent(ph.namespace)}/deployments/${encodeURIComponent(ph.deployment)}/scale`;
      const r = await this.call(calls, "GET", path);
      if (r.status >= 400 && r.status !== 404) throw this.failed("GET", path, r);
      const replicas = r.status === 404 ? 0 : Number((r.body as { spec?: { replicas?: number } } | null)?.spec?.replicas ?? 0);
      if (replicas > 0) out.push({ kind: "standby", id: `${ph.namespace}/${ph.deployment}:${replicas}`, az, detail: `placeholder ${ph.namespace}/${ph.deployment} at ${replicas} replicas with no llm-ha wake` });
    }
    return out;
  }

  /** The pool's launches since its wake, from its NodeClaims (a claim being deleted counts for nothing). */
  private launches(claims: NodeClaim[], wokenAt: number | null): Pick<WakeGroupView, "inService" | "pending" | "failures"> {
    const from = wokenAt === null ? Number.NEGATIVE_INFINITY : wokenAt - 2000;
    let inService = 0;
    let pending = 0;
    const failures: WakeGroupView["failures"] = [];
    for (const c of claims) {
      if (c.metadata?.deletionTimestamp) continue;
      const launched = condition(c, "Launched");
      if (condition(c, "Initialized")?.status === "True") inService += 1;
      else if (launched?.status === "True") pending += 1;
      else if (launched?.status === "False") {
        const at = msOf(launched.lastTransitionTime) || msOf(c.metadata?.creationTimestamp);
        if (at >= from) failures.push({ at, message: `${launched.reason ?? "LaunchFailed"}: ${launched.message ?? "launch failed"}` });
      }
    }
    return { inService, pending, failures: failures.sort((a, b) => a.at - b.at) };
  }

  private poolsOf(az: string): StandbyNodePool[] {
    if (this.o.pools.length === 0) throw new KarpenterApiError("no standby NodePools configured (LLMHA_STANDBY_NODEPOOLS is empty)");
    if (this.o.standbyAz !== undefined && az !== this.o.standbyAz) throw new KarpenterApiError(`no standby NodePools in ${az}: LLMHA_STANDBY_NODEPOOLS lists ${this.o.standbyAz}'s`);
    return this.o.pools;
  }

  private async call(calls: Calls, method: string, path: string, body?: unknown, contentType?: string): Promise<KubeReply> {
    calls.n += 1;
    try {
      return await kubeCall(this.o.api, method, path, body, contentType);
    } catch (err) {
      throw new KarpenterApiError(`${method} ${path}: ${(err as Error).message}`);
    }
  }

  private failed(method: string, path: string, r: KubeReply): KarpenterApiError {
    const msg = (r.body as { message?: string } | null)?.message ?? r.text.slice(0, 200);
    return new KarpenterApiError(`${method} ${path}: HTTP ${r.status}${msg ? ` ${msg}` : ""}`);
  }

  /** The pool's limit and wake time; null when the pool does not exist. */
  private async readPool(calls: Calls, name: string): Promise<PoolState | null> {
    const path = `${KARPENTER}/nodepools/${encodeURIComponent(name)}`;
    const r = await this.call(calls, "GET", path);
    if (r.status === 404) return null;
    if (r.status >= 400) throw this.failed("GET", path, r);
    const pool = r.body as { metadata?: { annotations?: Record<string, string> }; spec?: { limits?: Record<string, string | number> } } | null;
    const limit = pool?.spec?.limits?.[GPU_RESOURCE];
    const woken = Number(pool?.metadata?.annotations?.[WOKEN_AT_ANNOTATION] ?? "");
    return { limit: limit === undefined ? undefined : String(limit), wokenAt: Number.isFinite(woken) && woken > 0 ? woken : null };
  }

  private async patchPool(calls: Calls, name: string, patch: object): Promise<void> {
    const path = `${KARPENTER}/nodepools/${encodeURIComponent(name)}`;
    const r = await this.call(calls, "PATCH", path, patch, "application/merge-patch+json");
    if (r.status >= 400) throw this.failed("PATCH", path, r);
  }

  private async listClaims(calls: Calls, pool: string): Promise<NodeClaim[]> {
    const path = `${KARPENTER}/nodeclaims?labelSelector=${encodeURIComponent(`${NODEPOOL_LABEL}=${pool}`)}`;
    const r = await this.call(calls, "GET", path);
    if (r.status >= 400) throw this.failed("GET", path, r);
    return ((r.body as { items?: NodeClaim[] } | null)?.items ?? []).filter((c) => c && typeof c === "object");
  }

  private async deleteClaim(calls: Calls, name: string): Promise<void> {
    const path = `${KARPENTER}/nodeclaims/${encodeURIComponent(name)}`;
    const r = await this.call(calls, "DELETE", path);
    // Gone already (Karpenter or a retry deleted it): the desired state holds.
    if (r.status >= 400 && r.status !== 404) throw this.failed("DELETE", path, r);
  }

  /** The placeholder to `replicas` when it differs (`up`: only raised); null when nothing changed or none is configured. */
  private async scalePlaceholder(calls: Calls, replicas: number, way: "up" | "down"): Promise<string | null> {
    const ph = this.o.placeholder;
    if (!ph) return null;
    const path = `/apis/apps/v1/namespaces/${encodeURIComponent(ph.namespace)}/deployments/${encodeURIComponent(ph.deployment)}/scale`;
    const r = await this.call(calls, "GET", path);
    if (r.status >= 400) throw this.failed("GET", path, r);
    const cur = Number((r.body as { spec?: { replicas?: number } } | null)?.spec?.replicas ?? 0);
    if (way === "up" ? cur >= replicas : cur === replicas) return null;
    const p = await this.call(calls, "PATCH", path, { spec: { replicas } }, "application/merge-patch+json");
    if (p.status >= 400) throw this.failed("PATCH", path, p);
    return `placeholder ${ph.namespace}/${ph.deployment} replicas ${cur}→${replicas}`;
  }
}
