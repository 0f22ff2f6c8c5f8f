/**
 * `node-compromise`: root on one GPU node, with everything the node holds — its agent's Redis
 * credential and its projected ServiceAccount token — turned against the rest of the fleet:
 *
 * - the node-credential playbook of `redis-forgery` (phantom members and records, a member moved
 *   to another AZ, planted available-set ids, the shared indexes deleted, another node's record
 *   forged failed and held by a foreign instance, an enrolment with a made-up token);
 * - the node's own, valid token presented to enrol as another node;
 * - other nodes taken out of their AZ's available set;
 * - fake canary voters (made-up ids and real nodes' ids) agreeing on a wrong answer, enough to
 *   outvote the fleet if they counted;
 * - `EVAL "while true do end" 0`, which would freeze Redis for every client.
 *
 * Held when: no AZ state or tier changes, no cloud action, no node out of rotation or drained on a
 * canary mismatch, every real node's heartbeat keeps landing (each stays HEALTHY in the
 * observer's samples), the forgeries are counted by the leader (`llmha_redis_distrusted_total
 * {what="forged"}`) and `LlmHaNodeCredentialMisused` fires, and Redis never answers BUSY.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { RedisKeys } from "../../../agent/src/fleet/redis/keys";
import { sleep } from "../../../agent/src/util/net";
import type { SimNode } from "../../sim/sim-node";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_MODEL } from "../settings";
import { l1Removed } from "../timeline";
import { blank, finish, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";
import { nodeCredentialPlaybook } from "./security";

/** Longer than the controller's hysteresis, two lease contend periods and a canary round. */
const WATCH_MS = 10_000;

/** The leader's count of forged records (every agent serves the metric; only the leader moves it). */
async function forgedCounted(nodes: readonly SimNode[]): Promise<number> {
  let sum = 0;
  await Promise.all(
    nodes.map(async (n) => {
      const text = await fetch(`http://${n.address}:${n.httpPort}/metrics`, { signal: AbortSignal.timeout(2000) }).then((r) => r.text()).catch(() => "");
      const m = /^llmha_redis_distrusted_total\{[^}]*what="forged"[^}]*\} (\d+(?:\.\d+)?)/m.exec(text);
      if (m) sum += Number(m[1]);
    }),
  );
  return sum;
}

/** PINGs Redis every 50 ms; counts answers that were BUSY or did not come within 500 ms. */
function busyWatch(url: string): { stop(): Promise<{ pings: number; busy: number }> } {
  const r = new Redis(url, { maxRetriesPerRequest: 0, commandTimeout: 500 });
  r.on("error", () => undefined);
  let on = true;
  let pings = 0;
  let busy = 0;
  const loop = (async () => {
    while (on) {
      pings++;
      await r.ping().catch((err: Error) => {
        if (/BUSY|timed out/i.test(err.message)) busy++;
      });
      await sleep(50);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      r.disconnect();
      return { pings, busy };
    },
  };
}

export async function runNodeCompromise(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const keys = new RedisKeys(ctx.stack.cluster);
  const azs = ctx.stack.azs.map((a) => a.name);
  const running = ctx.stack.running().filter((n) => !ctx.stack.azOf(n).standby);
  const thiefNode = running[0];
  const others = running.filter((n) => n !== thiefNode);
  const admin = new Redis(ctx.stack.redis.url, { maxRetriesPerRequest: 1 });
  const cred = new Redis(ctx.stack.redis.urlAs("llmha-agent"), { maxRetriesPerRequest: 0, commandTimeout: 2000 });
  admin.on("error", () => undefined);
  cred.on("error", () => undefined);
  const state = async (): Promise<string> => {
    const [st, tier] = await Promise.all([Promise.all(azs.map((az) => admin.hget(keys.azState(az), "state"))), admin.hget(keys.tier, "level")]);
    return `${azs.map((az, i) => `${az}=${st[i] ?? ""}`).join(",")} tier=${tier ?? ""}`;
  };
  const busy = busyWatch(ctx.stack.redis.url);
  try {
    const before = await state();
    const actionsBefore = ctx.stack.cloud?.actions.length ?? 0;
    const forgedBefore = await forgedCounted(running);
    // The node's own identity material: the token its kubelet projected (the drill's issuer minted it).
    const tokenFile = join(ctx.stack.tokenDir, `${thiefNode.id}.token`);
    let ownToken = "";
    try {
      ownToken = readFileSync(tokenFile, "utf8").trim();
    } catch {
      r.notes.push(`no token file for ${thiefNode.id} (${tokenFile}): node identities off; enrolling as another node with it is skipped`);
    }
    r.injectAt = mark(ctx, "inject", `${spec.name}: ${thiefNode.id}'s Redis credential and token used against the fleet`);
    const wrong = JSON.stringify({ az: others[0]?.az ?? azs[0], model: DRILL_MODEL, at: Date.now(), answers: { p0: { text: "forged", logprobs: null } } });
    const attempts: [string, () => Promise<unknown>][] = [
      ...nodeCredentialPlaybook(ctx, keys, cred, others.slice(0, 2)),
      ...others.map((n): [string, () => Promise<unknown>] => [`${n.id} out of its available set`, () => cred.zrem(keys.azAvailable(n.az), n.id)]),
      // Fake voters: made-up ids and real nodes' ids, all agreeing on one wrong answer (more than the real nodes).
      ...Array.from({ length: running.length + 2 }, (_, i): [string, () => Promise<unknown>] => [`fake canary voter ghost-v${i}`, () => cred.hset(keys.canaryAnswers, `ghost-v${i}`, wrong)]),
      ...others.map((n): [string, () => Promise<unknown>] => [`canary vote in ${n.id}'s name`, () => cred.hset(keys.canaryAnswers, n.id, wrong)]),
      ...(ownToken && others[0] ? [[`enrol as ${others[0].id} with ${thiefNode.id}'s own token`, () => cred.xadd(keys.enrol, "*", "nodeId", others[0].id, "token", ownToken, "publicKey", "x")] as [string, () => Promise<unknown>]] : []),
      ["the shared indexes and the event stream deleted", () => cred.del(keys.members, keys.nodes, keys.dead, keys.azs, keys.events)],
      ["EVAL while true do end", () => cred.call("EVAL", "while true do end", "0")],
    ];
    let refused = 0;
    let evalAccepted = 0;
    for (const [what, go] of attempts) {
      try {
        await go();
        if (what.startsWith("EVAL")) evalAccepted++;
      } catch (err) {
        const msg = (err as Error).message;
        if (/NOPERM|no permissions|can't access/i.test(msg)) refused++;
        else if (what.startsWith("EVAL")) {
          // Not refused: it ran on (Redis answering BUSY). End it and count it.
          evalAccepted++;
          r.notes.push(`ACCEPTED: ${what} (${msg.slice(0, 60)})`);
          await admin.call("SCRIPT", "KILL").catch(() => undefined);
        } else r.notes.push(`${what}: ${msg.slice(0, 80)}`);
      }
    }
    await until(ctx, WATCH_MS, () => false);
    r.healAt = mark(ctx, "heal", `${spec.name}: watch over`);
    const after = await state();
    if (after !== before) r.notes.push(`states ${before} → ${after}`);
    r.endAt = ctx.now();
    finish(ctx, r, [], l1Removed);
    // A real node out of HEALTHY in any sample of the window: its heartbeat refused, its record believed forged, or a canary drain.
    const hurt = new Set<string>();
    for (const s of ctx.tl.samples) {
      if (s.t < r.injectAt || s.t > r.healAt) continue;
      for (const n of running) if (s.nodes[n.id] && s.nodes[n.id].status !== "HEALTHY") hurt.add(n.id);
    }
    const forgedAfter = await forgedCounted(running);
    const pinged = await busy.stop();
    Object.assign(r.extra, {
      attempts: attempts.length,
      refused,
      azStatesChanged: after !== before ? 1 : 0,
      actuatorCalls: (ctx.stack.cloud?.actions.length ?? 0) - actionsBefore,
      nodesHurt: hurt.size,
      forgeriesCounted: forgedAfter - forgedBefore,
      forgeriesUncounted: forgedAfter > forgedBefore ? 0 : 1,
      evalAccepted,
      redisPings: pinged.pings,
      redisBusy: pinged.busy,
    });
    r.extra.figures =
      `${thiefNode.id}'s credential: ${attempts.length} attempts (${refused} refused by Redis, the rest ignored by the leader); states ${after === before ? "unchanged" : `${before} → ${after}`}, ` +
      `${r.extra.actuatorCalls} cloud actions, ${hurt.size} real nodes out of HEALTHY${hurt.size ? ` (${[...hurt].join(",")})` : ""}; the leader counted ${r.extra.forgeriesCounted} forged records; ` +
      `Redis BUSY or silent in ${pinged.busy} of ${pinged.pings} pings`;
    r.notes.push(r.extra.figures as string);
  } finally {
    await busy.stop().catch(() => undefined);
    cred.disconnect();
    admin.disconnect();
  }
  return r;
}
