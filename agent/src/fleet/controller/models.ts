/**
 * Same model everywhere, published by the leader (every 10th period): the fleet's majority model
 * and the nodes and AZs that differ (id, revision, dtype, context: what each node's server says
 * it serves) — a fenced hash, an event on change, a warning, and the leader's `llmha_model_*`
 * series. While a rollout is active (the `rollout` hash's phase and `allow`), nodes serving one
 * of its two revisions are no outliers; once it ends, the normal check applies again.
 */
import type { Redis } from "ioredis";
import type { FencedWriter } from "../redis/fenced";
import type { RedisKeys } from "../redis/keys";
import type { RegistrySnapshot } from "../redis/registry";
import { modelSameness } from "../../node/evaluator/model-sameness";
import { allowedRevisions, relaxForRollout } from "../rollout/sameness";
import type { Logger } from "../../util/log";
import type { FleetMetrics } from "./metrics";

/** Outlier nodes named in the `models` hash (the count is always exact). */
const MODEL_OUTLIERS_LISTED = 50;

export interface ModelPublishDeps {
  redis: Redis;
  keys: RedisKeys;
  writer: FencedWriter;
  log: Logger;
  metrics?: FleetMetrics;
  recordKey?: (nodeId: string) => string | null;
}

/** Publishes once; `lastOutliers` (the previous call's outlier key) says whether to log. Returns the write's result and the new key. */
export async function publishModelSameness(d: ModelPublishDeps, snap: RegistrySnapshot, now: number, lastOutliers: string): Promise<{ accepted: boolean; outlierKey: string }> {
  const { redis, keys, writer, metrics } = d;
  const alive = snap.nodes.filter((n) => n.alive);
  const pipe = redis.pipeline();
  for (const n of alive) pipe.hmget(d.recordKey?.(n.nodeId) ?? keys.node(n.nodeId), "model", "modelRevision", "modelDtype", "maxContext");
  pipe.hmget(keys.rollout, "phase", "allow");
  const got = (await pipe.exec()) ?? [];
  const rows = alive.map((n, i) => {
    const [model, revision, dtype, ctx] = (Array.isArray(got[i]?.[1]) ? got[i][1] : []) as (string | null)[];
    return { nodeId: n.nodeId, az: n.az, model: model ?? "", revision: revision || null, dtype: dtype || null, maxContext: ctx ? Number(ctx) : null };
  });
  const [phase, allow] = (Array.isArray(got[alive.length]?.[1]) ? got[alive.length][1] : []) as (string | null)[];
  const same = relaxForRollout(modelSameness(rows), allowedRevisions(phase, allow), rows);
  const listed = same.outliers.slice(0, MODEL_OUTLIERS_LISTED);
  const outliers = listed.map((o) => `${o.nodeId}=${o.model}`).join(",");
  const outlierKey = same.outliers.map((o) => `${o.nodeId}=${o.model}`).join(",");
  if (outlierKey !== lastOutliers) {
    if (outlierKey) {
      d.log.warn(
        { majority: same.majority, outliers: listed, outlierCount: same.outliers.length, outlierAzs: same.outlierAzs },
        "nodes serve another model than the fleet's majority",
      );
    } else if (lastOutliers) d.log.info({ majority: same.majority }, "every serving node serves the fleet's majority model again");
  }
  const r = await writer.hset(
    `${keys.prefix}models`,
    {
      majority: same.majority ?? "", outliers, outlierCount: same.outliers.length, outlierAzs: same.outlierAzs.join(","),
      agreeing: same.agreeing, differs: JSON.stringify(Object.fromEntries(listed.map((o) => [o.nodeId, o.differs.join("+")]))), updatedAt: now,
    },
    { changeField: "outliers", eventType: "model" },
  );
  if (r.accepted) metrics?.setModels(same, snap.nodes.map((n) => n.az));
  return { accepted: r.accepted, outlierKey };
}
