/**
 * The drill's rollout actuator (`LLMHA_ACTUATOR=local`): granularity `node`, one simulated node
 * at a time, over loopback HTTP to the drill's local cloud (`LLMHA_LOCAL_CLOUD_URL`), which
 * restarts that node's inference server with the revision's profile (lab/drill/local-rollout.ts):
 *
 * | request                                                    | what the local cloud does (the real thing) |
 * |------------------------------------------------------------|--------------------------------------------|
 * | `POST /rollout/switch {node, instance, az, revision, image?, rolloutId, token}` | the node's inference server restarted (preStop drain, then a new server) serving `revision`: its profile's latency, corruption, continuation and load time; `already` when it serves it or is being switched to it; `refused-stale` for a token below the highest it has seen (a deposed leader's late call) | a pod of the new template replacing the old one |
 * | `POST /rollout/switch {az, revision, image?, rolloutId, token}` (no node: a promoted rollout's whole AZ) | every node of the AZ not on `revision`: a stopped one boots on it, a running one restarts on it, one after another | the AZ's Deployment template, even at zero replicas |
 *
 * A request's nodes are switched one call each, in order; the result is the worst of them
 * (`refused-stale`, then `failed`, then `applied`; `already` only when every node was). An HTTP
 * error or an answer that is not one is `failed`, naming it. `token` (the option) is a bearer
 * credential for the local cloud where one is set; the fencing token travels in the body.
 */
import type { RolloutActuator, RolloutSwitchRequest, RolloutSwitchResult } from "../rollout/types";
import type { Logger } from "../../util/log";

/** What the local cloud answers to one node's switch. */
export interface LocalRolloutReply {
  outcome: "applied" | "already" | "refused-stale";
  detail: string;
}

const OUTCOMES = new Set<string>(["applied", "already", "refused-stale"]);
/** Worst first: the result of a request is its nodes' worst. */
const RANK: Record<RolloutSwitchResult["outcome"], number> = { "refused-stale": 0, failed: 1, "dry-run": 2, applied: 3, already: 4 };

export interface LocalRolloutOptions {
  /** `LLMHA_LOCAL_CLOUD_URL`, e.g. `http://127.0.0.1:PORT`. */
  url: string;
  log: Logger;
  /** A bearer credential for the local cloud (sent as `Authorization`), where it wants one. */
  token?: string;
  /** Per request. Default 10000 ms (a loaded drill host answers slowly). */
  timeoutMs?: number;
}

export function localRolloutActuator(o: LocalRolloutOptions): RolloutActuator {
  const url = `${o.url.replace(/\/+$/, "")}/rollout/switch`;
  /** One call: `node` null asks for the AZ as a whole. */
  const one = async (req: RolloutSwitchRequest, node: { nodeId: string; host: string } | null): Promise<RolloutSwitchResult> => {
    let res: Response;
    let text: string;
    const who = node?.nodeId ?? req.az;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(o.token ? { authorization: `Bearer ${o.token}` } : {}) },
        body: JSON.stringify({ ...(node ? { node: node.nodeId, instance: node.host } : {}), az: req.az, revision: req.to.revision, image: req.to.image, rolloutId: req.rolloutId, token: req.token }),
        signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
      });
      text = await res.text();
    } catch (err) {
      return { outcome: "failed", detail: `${who}: local cloud /rollout/switch: ${(err as Error).message}` };
    }
    if (!res.ok) return { outcome: "failed", detail: `${who}: local cloud /rollout/switch: HTTP ${res.status} ${text.slice(0, 200)}` };
    let reply: Partial<LocalRolloutReply>;
    try {
      reply = JSON.parse(text) as Partial<LocalRolloutReply>;
    } catch {
      reply = {};
    }
    if (!OUTCOMES.has(String(reply.outcome))) return { outcome: "failed", detail: `${who}: local cloud /rollout/switch: not an answer: ${text.slice(0, 200)}` };
    return { outcome: reply.outcome!, detail: `${who}: ${String(reply.detail ?? "").slice(0, 300)}` };
  };
  return {
    kind: "local",
    granularity: "node",
    async switch(req: RolloutSwitchRequest): Promise<RolloutSwitchResult> {
      const results: RolloutSwitchResult[] = [];
      for (const n of req.nodes.length ? req.nodes : [null]) {
        const r = await one(req, n);
        results.push(r);
        // A stale token is stale for every node: asking again for the others only repeats it.
        if (r.outcome === "refused-stale") break;
      }
      const worst = results.reduce((a, b) => (RANK[b.outcome] < RANK[a.outcome] ? b : a));
      const outcome = results.every((r) => r.outcome === "already") ? "already" : worst.outcome === "already" ? "applied" : worst.outcome;
      const detail = results.map((r) => r.detail).join("; ");
      const level = outcome === "failed" || outcome === "refused-stale" ? "warn" : "info";
      o.log[level]({ event: "rollout-switch", actuator: "local", rolloutId: req.rolloutId, az: req.az, to: req.to.revision, token: req.token, outcome }, `rollout ${req.rolloutId}: switch ${req.nodes.length ? req.nodes.map((n) => n.nodeId).join(",") : `${req.az} as a whole`} to ${req.to.revision}: ${outcome}`);
      return { outcome, detail };
    },
  };
}
