/**
 * `llm-ha rollout`: an operator's hand on the AZ-by-AZ rollout the fenced leader carries out
 * (agent/src/fleet/rollout/types.ts). `start` asks for a new model revision (or engine image);
 * `pause`, `resume`, `abort` and `promote` act on the rollout under way; `status` shows it.
 * As `llm-ha practice` does, it reads the fleet first and refuses what the leader would refuse,
 * so the answer is known now; otherwise it writes one key (`rollout:request`, JSON) that the
 * leader acts on in its next period, once per id. `--wait` follows the rollout to its end.
 */
import { CONNECT_TIMEOUT_MS, explainContact, firstContact, openFleetRedis } from "../status/command";
import { toText } from "../status/lines";
import { rolloutReport } from "../status/rollout-render";
import { STATUS_JSON_VERSION } from "../status/types";
import { readFleetView } from "../status/view";
import { safeUrl } from "../../util/log";
import { followRollout, ROLLOUT_EXIT } from "./follow";
import { buildRequest, defaultRolloutId, fleetRevision, OWN_FLAGS, parseRolloutFlags, rolloutRefusal } from "./request";

export const ROLLOUT_USAGE = `Usage: llm-ha rollout start --to REV [--image REPO@sha256:DIGEST] [--bake S] [--id ID] [--wait]
       llm-ha rollout status [--json] [--wait]
       llm-ha rollout pause|resume|abort|promote [--id ID] [--wait]
       (each with the fleet flags below)

Changes the model revision (or the engine image) the fleet serves one AZ at a time, carried
out by the leader: the standby AZ first (or one canary node), then each AZ in turn, in batches
that keep the AZ at its capacity floor. Each step bakes: its gates (canary answers, errors,
latency, continuation, model-load time, engine-reported corruption, capacity) compare the new
revision with the old for the bake time; a failed gate rolls every changed node back.
While it runs, agents accept both revisions. Details: docs/operations.md.

  start                 ask for a rollout to --to REV (the revision the server reports:
                        vLLM's root, TGI's model_sha), with --image an engine change too
  status                the rollout: its steps with their AZ and nodes, the one under way,
                        the phase and since when, each gate's verdict and detail, the reason
  pause                 switch no more nodes and hold the bake (a failed gate still rolls back)
  resume                go on from a pause
  abort                 restore the old revision everywhere it was changed
  promote               end the current step's bake now (refused while a gate fails)

  --to REV              start: the revision to roll out (required)
  --image IMG           start: the inference image, by digest (REPO@sha256:<64 hex>)
  --bake S              start: seconds each step's gates must hold (default the leader's
                        LLMHA_ROLLOUT_BAKE_MS, 300 s)
  --id ID               start: the rollout's id (default rollout-<UTC date-time>); the others:
                        refuse unless ID is the rollout under way
  --wait                follow the rollout until it ends, printing each step and phase change
                        (status --wait on a rollout that ended exits at once with its code)
  --wait-timeout S      give up waiting after S seconds (default 21600)
  --json, -o json       status: one JSON document; the others: the request written
  --redis-url URL       redis:// or rediss:// (default $LLMHA_REDIS_URL; required)
  --cluster NAME        key namespace (default $LLMHA_CLUSTER or "default")
  --redis-ca-file PATH  CA bundle for rediss:// (default $LLMHA_REDIS_CA_FILE)
  --help                this text

The request is refused, and nothing written, when the leader would not act on it: start with
no leader, a rollout under way or a request not yet acted on, the tier at L2 or above, --to the
revision the fleet serves already, or the last rollout's id; the others with no rollout under
way, or in a phase they do not apply to (pause while paused or rolling back, resume unless
paused, abort while rolling back, promote unless baking or with a gate failing).

Exit codes: 0 requested or shown (with --wait: promoted), 1 Redis unreachable, 2 bad flags,
3 no data for the cluster, 4 refused (the reason is printed), 5 rolled back (with --wait: a
gate failed; the old revision is restored), 6 aborted (with --wait), 7 not ended within
--wait-timeout.
`;

/** Exit code of a request the leader would refuse. */
export const ROLLOUT_REFUSED = 4;

export async function rolloutCommand(argv: string[]): Promise<number> {
  const err = (line: string): void => {
    process.stderr.write(`llm-ha rollout: ${line}\n`);
  };
  const out = (line: string): void => {
    process.stdout.write(`${line}\n`);
  };
  const f = parseRolloutFlags(argv);
  if (f === null) {
    process.stdout.write(ROLLOUT_USAGE);
    return 0;
  }
  if (typeof f === "string") {
    err(`${f} (see llm-ha rollout --help)`);
    return 2;
  }
  const opened = openFleetRedis(f.rest, "llmha-rollout", err, { name: "rollout", usage: ROLLOUT_USAGE, flags: OWN_FLAGS });
  if (typeof opened === "number") return opened;
  const { args, keys, client } = opened;
  if (args.json && f.wait) {
    await client.close();
    err("--json and --wait do not go together: --wait prints each change as a line (see llm-ha rollout --help)");
    return 2;
  }
  try {
    // With --json a pipe into jq always gets a document (as status's): the error rides in it, the message on stderr.
    const fail = (message: string, code: number): number => {
      if (args.json) out(JSON.stringify({ version: STATUS_JSON_VERSION, cluster: keys.cluster, redis: safeUrl(args.redisUrl), now: Date.now(), error: message }, null, 2));
      err(message);
      return code;
    };
    const contact = await firstContact(client, CONNECT_TIMEOUT_MS);
    if (contact !== null) return fail(`cannot reach Redis at ${safeUrl(args.redisUrl)}: ${await explainContact(args.redisUrl, contact)}`, 1);
    const view = await readFleetView(client.redis, keys, { events: 1, url: safeUrl(args.redisUrl) });
    if (view.empty) return fail(`no llm-ha data for cluster ${keys.cluster} in Redis: no agent or leader writes there, so no one would act on a request (check --cluster)`, 3);
    const r = view.rollout ?? null;
    if (f.op === "status") {
      if (args.json) {
        out(JSON.stringify({ version: view.version, cluster: view.cluster, now: view.now, fleetRevision: fleetRevision(view), rollout: r }, null, 2));
        return 0;
      }
      const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
      out(toText(rolloutReport(r, view.now, keys.cluster), { color, width: args.width }).join("\n"));
      const last = r?.last;
      if (!f.wait || !last) return 0;
      if (!last.active) return ROLLOUT_EXIT[last.phase] ?? 0;
      out("");
      return await followRollout(client.redis, keys, last.id, view.now, f.timeoutMs, { out, err });
    }
    if (f.op === "start" && f.id === undefined) f.id = defaultRolloutId(view.now);
    const refusal = rolloutRefusal(view, f);
    if (refusal) {
      err(`not requested: ${refusal}`);
      return ROLLOUT_REFUSED;
    }
    const overdue = r?.pending ?? null;
    if (overdue) err(`replacing the ${overdue.op} request ${overdue.id}, not acted on in ${Math.round((view.now - overdue.at) / 1000)} s (refused by the leader, or no leader ran)`);
    const req = buildRequest(view, f, view.now);
    // A day is long past any leader's period: a request no leader took by then is not acted on.
    await client.redis.set(keys.rolloutRequest, JSON.stringify(req), "PX", 86_400_000);
    if (args.json) {
      out(JSON.stringify({ version: STATUS_JSON_VERSION, cluster: keys.cluster, key: keys.rolloutRequest, request: req }, null, 2));
      return 0;
    }
    const leader = view.leader.holder?.replace(/\/\d+$/, "") ?? null;
    const who = leader ? `the leader (${leader}) acts on it on its next period` : "no leader holds the lease now: the next leader acts on it when it takes over";
    if (req.op === "start") {
      const bake = req.bakeMs !== undefined ? `${req.bakeMs / 1000} s` : "the leader's default (LLMHA_ROLLOUT_BAKE_MS)";
      out(`rollout ${req.id} requested at ${new Date(req.at).toISOString()} for cluster ${keys.cluster}: ${fleetRevision(view) ?? "the fleet's revision"} → ${req.to!.revision}${req.to!.image ? ` (image ${req.to!.image})` : ""}, bake ${bake} per step`);
      out(`${who}: the standby AZ first (or one canary node), then each AZ in turn, each step baked against its gates; \`llm-ha rollout status\` shows it`);
    } else {
      const s = r!.last!;
      const what = { pause: "switches no more nodes and holds the bake", resume: "goes on from where it paused", abort: `restores ${s.from.revision} on every node that has ${s.to.revision}, this step's first`, promote: "ends this step's bake now and moves to the next step" }[req.op as "pause" | "resume" | "abort" | "promote"];
      out(`${req.op} of rollout ${req.id} requested at ${new Date(req.at).toISOString()} (now ${s.phase}, step ${s.step + 1} of ${s.steps.length}${s.steps[s.step] ? `: ${s.steps[s.step].az}` : ""})`);
      out(`${who}: it ${what}`);
    }
    return f.wait ? await followRollout(client.redis, keys, req.id, req.at, f.timeoutMs, { out, err }) : 0;
  } catch (e) {
    err(`cannot read or write the request in Redis: ${(e as Error).message}`);
    return 1;
  } finally {
    await client.close();
  }
}
