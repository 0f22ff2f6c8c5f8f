/**
 * L4, the global outage: every GPU of every AZ lost, the standby's included (it boots with
 * its GPUs lost too). The scenario starts the L4 pieces beside the drill's fleet: a real
 * Kafka-protocol broker (kcat's mock cluster), `llm-ha fallback` on the drill's Redis and
 * cluster (it reads the tier the leader publishes) and an L1 proxy rendered by the same
 * generator with the fallback backend (`nbsrv(servers) eq 0`). Client traffic through it mixes
 * prompts with a verified answer, queue-opt-in requests and plain requests; then the GPUs
 * come back and the replay drains the queue through the same proxy.
 *
 * Figures: time from the last server out to the first L4 answer, cached answers served and
 * correct, queued requests answered exactly once (lost, duplicates), time from the heal to an
 * empty queue, 503s carrying Retry-After, and the baseline: the drill's own client through
 * the AZ proxies, which have no L4, fails every request meanwhile.
 */
import { appendFileSync, createWriteStream } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { VerifiedCache } from "../../../agent/src/edge/fallback/cache";
import { runFallback, type RunningFallback } from "../../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../../agent/src/edge/fallback/config";
import { promSum } from "../../../agent/src/node/sources/engine-metrics";
import { createLogger } from "../../../agent/src/util/log";
import { freePort, sleep } from "../../../agent/src/util/net";
import type { HaproxyStaticServer } from "../../../contracts/haproxy-config";
import { startHaproxy, type HaproxyHandle } from "../../engines/haproxy";
import { startKafkaMock, type KafkaMockHandle } from "../../engines/kafka-mock";
import { startFallbackProcess, type FallbackProcess } from "../../fallback-process";
import type { SimNode } from "../../sim/sim-node";
import type { ScenarioSpec } from "../scenarios";
import { SDK_CLIENT } from "../sdk-traffic";
import { DRILL_AGENT_TUNING } from "../settings";
import { DRILL_MODEL } from "../stack";
import { failuresBetween, firstAfter, l1Removed, type Sample } from "../timeline";
import { asTenant, crashAtRecovery, duringL4, POISON_TENANT, taggedRuns, VICTIM_TENANT } from "./outage-l4";
import { blank, finish, healthy, MAIN_CLIENT, mark, steady, until, type RunResult, type ScenarioContext } from "./runner";

const L4_PROXY = "l4";
const CACHED = [
  { prompt: "What is the status page of the inference service?", answer: "https://status.example.test — verified answer 1" },
  { prompt: "How do I reset my API key?", answer: "Settings → API keys → Rotate. (verified answer 2)" },
  { prompt: "What are the service hours?", answer: "The service runs 24/7. (verified answer 3)" },
];

type Kind = "cached" | "queue" | "plain";
interface L4Record {
  kind: Kind;
  t: number;
  end: number;
  status: number;
  degraded: string | null;
  retryAfter: string | null;
  /** The cached prompt's index, or the queued request's id. */
  ref: number | string | null;
  /** The tag its prompt opens with (counted at the inference servers). */
  tag: string;
  content: string | null;
}

function staticServer(n: SimNode): HaproxyStaticServer {
  return { name: n.id, address: n.address, port: n.inferencePort, agentPort: n.agentCheckPort, httpPort: n.httpPort };
}

async function send(url: string, kind: Kind, seq: number, now: () => number, run: number): Promise<L4Record> {
  const t = now();
  const ref = kind === "cached" ? seq % CACHED.length : null;
  // Unique per run: the servers' counts and the idempotency keys outlive a run.
  const tag = `r${run}${kind[0]}${seq}`;
  const prompt = kind === "cached" ? CACHED[seq % CACHED.length].prompt : `l4#${tag} ${kind} request ${seq}`;
  const headers: Record<string, string> = { "content-type": "application/json", ...asTenant("drill-a") };
  if (kind === "queue") headers["x-llmha-queue"] = "allow";
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: DRILL_MODEL, messages: [{ role: "user", content: prompt }], temperature: 0, max_tokens: 8 }),
      // Past the fallback's 5 s wait for the broker's acknowledgement (its 503 comes after it).
      signal: AbortSignal.timeout(15_000),
    });
    const body = (await res.json().catch(() => null)) as { id?: string; choices?: Array<{ message?: { content?: string } }> } | null;
    return {
      kind, t, end: now(), status: res.status, degraded: res.headers.get("x-llmha-degraded"), retryAfter: res.headers.get("retry-after"),
      ref: res.status === 202 ? (body?.id ?? null) : ref, content: body?.choices?.[0]?.message?.content ?? null, tag,
    };
  } catch {
    return { kind, t, end: now(), status: 0, degraded: null, retryAfter: null, ref, content: null, tag };
  }
}

/** The global outage, measured through a proxy with the L4 fallback. */
export async function runGlobalOutage(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const { stack } = ctx;
  const active = stack.nodes.filter((n) => !stack.azOf(n).standby);
  let kafka: KafkaMockHandle | null = null;
  let fb: RunningFallback | null = null;
  let hp: HaproxyHandle | null = null;
  let second: FallbackProcess | null = null;
  let survivor: FallbackProcess | null = null;
  const redis = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined); // a dropped connection reconnects; unhandled, ioredis prints each one
  const logPath = join(tmpdir(), `llmha-drill-fallback-${process.pid}-${run}.log`);
  try {
    kafka = await startKafkaMock();
    const [fbPort, l4Port, metricsPort] = [await freePort(), await freePort(), await freePort()];
    const l4Url = `http://127.0.0.1:${l4Port}`;
    // The fallback that answers at L4 runs in the drill's process (its figures are read from it)
    // and replays nothing: the replay group is two fallbacks of their own, as two L1 pods run it
    // — one survives, one is killed with SIGKILL as the tier drops. A replay member inside the
    // drill's busy process was always late to sync after a rebalance (the broker frozen for the
    // retried-503 check evicts every member), and the kcat mock broker refuses a member that
    // syncs after its leader: it crashed and rejoined in a loop and the replay stalled.
    const cfg = loadFallbackConfig([
      "--host", "127.0.0.1", "--port", String(fbPort), "--metrics-addr", "127.0.0.1:0", "--cluster", stack.cluster, "--redis-url", stack.redis.urlAs("llmha-fallback"),
      "--kafka-brokers", kafka.bootstrap, "--models", DRILL_MODEL, "--l1-url", l4Url, "--replay", "false", "--retry-after-s", "10", "--wake-eta-s", "60",
    ], {});
    const fbLog = createLogger({ level: "info", name: "llm-ha-fallback", destination: createWriteStream(logPath) });
    const member = (metricsAddr: string): Promise<FallbackProcess> => startFallbackProcess([
      "--metrics-addr", metricsAddr, "--cluster", stack.cluster, "--redis-url", stack.redis.url, "--kafka-brokers", kafka!.bootstrap, "--models", DRILL_MODEL,
      "--l1-url", l4Url, "--replay-rps", "20", "--replay-attempts", "10", "--replay-timeout-ms", "10000", "--log-level", "info",
    ], 120_000); // a loaded machine takes a while to load the sources
    // Everything at once: the members' start (tsx loading the sources) is most of the wait.
    const fbStarted = runFallback(cfg, { log: fbLog });
    const hpStarted = startHaproxy({
      proxies: [{
        name: L4_PROXY, bind: `127.0.0.1:${l4Port}`, health: "agent", tuning: DRILL_AGENT_TUNING,
        servers: { kind: "static", local: active.map(staticServer), backup: stack.nodes.filter((n) => stack.azOf(n).standby).map(staticServer) },
        fallback: { address: `127.0.0.1:${fbPort}`, timeoutServerMs: 15_000 },
      }],
    });
    const started = await Promise.allSettled([fbStarted, hpStarted, member(`127.0.0.1:${metricsPort}`), member("off")]);
    fb = started[0].status === "fulfilled" ? started[0].value : null;
    hp = started[1].status === "fulfilled" ? started[1].value : null;
    survivor = started[2].status === "fulfilled" ? started[2].value : null;
    second = started[3].status === "fulfilled" ? started[3].value : null;
    const failed = started.find((x): x is PromiseRejectedResult => x.status === "rejected");
    if (failed || !fb || !hp || !survivor || !second) throw failed?.reason ?? new Error("the L4 pieces did not start");
    // Verified answers come from an operator (the fallback's own role only reads them).
    const operator = new Redis(stack.redis.urlAs("llmha-operator"), { maxRetriesPerRequest: 1 });
    const imported = await new VerifiedCache(operator, stack.cluster).importJsonl(
      CACHED.map((c) => JSON.stringify({ request: { model: DRILL_MODEL, messages: [{ role: "user", content: c.prompt }], temperature: 0, max_tokens: 8 }, answer: c.answer })).join("\n"),
    );
    operator.disconnect();
    if (imported.imported !== CACHED.length) r.notes.push(`only ${imported.imported} verified answers imported`);
    const l4Rows = (): Promise<Array<{ server: string; status: string; weight: number; total: number }>> =>
      hp!.stats().then((rows) => rows.filter((x) => x.proxy === `${L4_PROXY}_servers`));
    // Every active server UP in the L4 proxy before the fault.
    const activeIds = new Set(active.map((n) => n.id));
    const upDeadline = ctx.now() + 15_000;
    while (ctx.now() < upDeadline) {
      const rows = (await l4Rows().catch(() => [])).filter((x) => activeIds.has(x.server)); // a loaded HAProxy may miss one answer
      if (rows.length === active.length && rows.every((x) => x.status.startsWith("UP"))) break;
      await sleep(100);
    }
    // Traffic: cached / queue / plain in turn, one every 80 ms.
    const recs: L4Record[] = [];
    let stopTraffic = false;
    const traffic = (async () => {
      const kinds: Kind[] = ["cached", "queue", "plain"];
      for (let seq = 0; !stopTraffic; seq++) {
        void send(l4Url, kinds[seq % 3], Math.floor(seq / 3), ctx.now, run).then((x) => recs.push(x));
        await sleep(80);
      }
    })();
    // The moment the L4 proxy first has no usable server left (nbsrv 0), and how long it has none in all:
    // a standby node booting can pass the plain check before its agent reports the lost GPU.
    let lastOutAt: number | null = null;
    let outSince: number | null = null;
    let outTotalMs = 0;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const rows = await l4Rows().catch(() => []);
        const out = rows.length > 0 && rows.every((x) => l1Removed(x));
        const t = ctx.now();
        if (out && r.injectAt > 0) {
          lastOutAt ??= t;
          outSince ??= t;
        } else if (outSince !== null) {
          outTotalMs += t - outSince;
          outSince = null;
        }
        await sleep(25);
      }
    })();
    await sleep(1000);

    r.injectAt = mark(ctx, "inject", `${spec.name}: every GPU of every AZ lost (standby included)`);
    await Promise.all(stack.nodes.map((n) => n.gpuFault("gpuLost")));
    // Until the leader publishes L4, then long enough for the queue to fill.
    const l4Seen = await until(ctx, 15_000, () => lastOutAt !== null && ctx.tl.fleet.at(-1)?.tier === "L4");
    if (!l4Seen) r.notes.push(ctx.fleetWired ? "tier L4 not published within 15 s" : "fleet layer not wired: no tier published");
    // The SDK-class checks while L4 holds (at least 8 s of outage in all).
    const l4ChecksAt = ctx.now();
    const checks = await duringL4(l4Url, kafka, CACHED[2].prompt, run);
    const retryTag = `r${run}retry503`;
    r.notes.push(...checks.notes);
    await sleep(Math.max(0, 8000 - (ctx.now() - l4ChecksAt)));
    const outAt = lastOutAt as number | null;
    watching = false;
    await watch;
    if (outSince !== null) outTotalMs += ctx.now() - outSince;

    const crash = crashAtRecovery({ fb: second, kafkaBrokers: kafka.brokers, cluster: stack.cluster, tierLevel: () => redis.hget(`llmha:${stack.cluster}:tier`, "level"), log: fbLog, timeoutMs: 60_000 });
    r.healAt = mark(ctx, "heal", "GPUs back");
    await Promise.all(stack.nodes.map((n) => n.gpuFault(null)));
    const back = (s: Sample): boolean => active.every((n) => healthy(ctx, s, n));
    if (!(await until(ctx, 30_000, back))) r.notes.push("active nodes not back in 30 s");
    r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, back);
    await sleep(1500);
    stopTraffic = true;
    await traffic;
    await sleep(500);

    const crashed = await crash;
    r.notes.push(...crashed.notes);
    // Drain: every queued request answered (GET 200, done) — fetched through the L1 proxy, as
    // its tenant — or not, within 60 s.
    const queuedRecs = recs.filter((x) => x.kind === "queue" && x.status === 202 && typeof x.ref === "string");
    const queuedIds = queuedRecs.map((x) => x.ref as string);
    const tenantOfId = new Map<string, string>([...queuedIds.map((id): [string, string] => [id, "drill-a"]), ...checks.queued.map((q): [string, string] => [q.id, q.tenant])]);
    const states = new Map<string, string>();
    const results = new Map<string, unknown>();
    const drainDeadline = ctx.now() + 60_000;
    let drainedAt: number | null = null;
    while (ctx.now() < drainDeadline) {
      await Promise.all([...tenantOfId.keys()].filter((id) => !states.has(id)).map(async (id) => {
        const res = await fetch(`${l4Url}/v1/llmha/requests/${id}`, { headers: asTenant(tenantOfId.get(id)!) }).catch(() => null);
        if (res?.status === 200) {
          const body = (await res.json()) as { state: string; response?: unknown; error?: { message?: string } };
          states.set(id, body.error?.message ? `${body.state}: ${body.error.message}` : body.state);
          results.set(id, body.response);
        } else await res?.arrayBuffer();
      }));
      if (states.size === tenantOfId.size) {
        drainedAt = ctx.now();
        break;
      }
      await sleep(200);
    }
    r.endAt = ctx.now();
    finish(ctx, r, active, l1Removed);

    // Replay results as the surviving member counts them (the killed one's died with it).
    const replayed = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((x) => x.text(), () => "");
    const count = (result: string): number => promSum(replayed, "llmha_fallback_replayed_total", { result }) ?? 0;
    const inOutage = recs.filter((x) => outAt !== null && x.t >= outAt && x.end <= r.healAt);
    const l4Answers = recs.filter((x) => outAt !== null && x.end >= outAt && x.degraded !== null).sort((a, b) => a.end - b.end);
    const cachedServed = inOutage.filter((x) => x.kind === "cached" && x.degraded === "cache");
    const cachedCorrect = cachedServed.filter((x) => typeof x.ref === "number" && x.content === CACHED[x.ref].answer);
    const cachedAsked = inOutage.filter((x) => x.kind === "cached");
    const s503 = inOutage.filter((x) => x.status === 503);
    // A request the killed fallback had claimed is failed, never run again (at most once): the
    // client reads `failed: interrupted` and may send it anew. Counted apart from the lost ones.
    const interruptedIds = [...tenantOfId.keys()].filter((id) => /^failed: interrupted/.test(states.get(id) ?? ""));
    const lost = [...tenantOfId.keys()].filter((id) => states.get(id) !== "done").length - interruptedIds.length;
    // Runs counted at the inference servers: each queued request once, the repeated key and the retried 503 once.
    const { runs, via } = await taggedRuns(stack.nodes);
    const runsOf = (tag: string): number => runs.get(tag) ?? 0;
    // A poisoning attempt: the victim asks the verified prompt at the fallback (directly, as at L4) and must get the verified answer.
    const victim = await fetch(`http://127.0.0.1:${fbPort}/v1/chat/completions`, {
      method: "POST", headers: { "content-type": "application/json", ...asTenant(VICTIM_TENANT) },
      body: JSON.stringify({ model: DRILL_MODEL, messages: [{ role: "user", content: CACHED[2].prompt }], temperature: 0, max_tokens: 8 }),
    }).then(async (x) => ((await x.json()) as { choices?: Array<{ message?: { content?: string } }> }).choices?.[0]?.message?.content ?? null, () => null);
    const evilAnswer = checks.poison.evilId ? ((results.get(checks.poison.evilId) as { choices?: Array<{ message?: { content?: string } }> } | undefined)?.choices?.[0]?.message?.content ?? null) : null;
    const poisonServed = victim !== CACHED[2].answer || (evilAnswer !== null && victim === evilAnswer) ? 1 : 0;
    if (checks.poison.evilId === null) r.notes.push(`${POISON_TENANT}'s poisoning attempt was not queued`);
    // A 200 without the header is the fleet's own answer (a standby node booting).
    const bad = inOutage.filter((x) => x.status !== 200 && x.status !== 202 && !(x.status === 503 && x.retryAfter !== null));
    const duplicates = queuedRecs.filter((x) => runsOf(x.tag) > 1).length + (checks.idemTag ? Math.max(0, runsOf(checks.idemTag) - 1) : 0) + Math.max(0, runsOf(retryTag) - 1);
    const baselineFailed = outAt === null ? null : failuresBetween(ctx.tl, MAIN_CLIENT, outAt, r.healAt);
    // The SDK class talks to the AZ proxies: while no server is left anywhere, nothing can answer
    // it but L4's 503 (it asks neither a verified prompt nor the queue).
    r.failedSdkNoServer = outAt === null ? 0 : failuresBetween(ctx.tl, SDK_CLIENT, outAt, r.healAt + (r.recoveryMs ?? 0));

    r.extra.firstL4Ms = outAt === null || l4Answers.length === 0 ? null : Math.max(0, l4Answers[0].end - outAt);
    r.extra.noServerMs = outTotalMs;
    r.extra.outageRequests = inOutage.length;
    r.extra.cachedAsked = cachedAsked.length;
    r.extra.cachedServed = cachedServed.length;
    r.extra.cachedCorrectPct = cachedServed.length ? Math.round((1000 * cachedCorrect.length) / cachedServed.length) / 10 : null;
    r.extra.queued = queuedIds.length;
    r.extra.replayedDone = count("done");
    r.extra.replayedFailed = count("failed");
    r.extra.duplicates = duplicates;
    r.extra.lost = lost;
    r.extra.interrupted = interruptedIds.length;
    r.extra.drainMs = drainedAt === null ? null : drainedAt - r.healAt;
    // Reachable: a final state (done, or failed with its reason) fetched through the L1 proxy as its tenant.
    r.extra.resultsViaL1Pct = tenantOfId.size ? Math.round((1000 * states.size) / tenantOfId.size) / 10 : null;
    r.extra.idempotentSameId = checks.idemSame ? 1 : 0;
    r.extra.idemRuns = checks.idemTag ? runsOf(checks.idemTag) : null;
    r.extra.retry503Runs = runsOf(retryTag);
    r.extra.poisonServed = poisonServed;
    r.extra.crashResumeMs = crashed.resumeMs;
    r.extra.unavailable503 = s503.length;
    r.extra.retryAfterMissing = s503.filter((x) => x.retryAfter === null).length;
    r.extra.retryAfterPct = s503.length ? Math.round((1000 * (s503.length - r.extra.retryAfterMissing)) / s503.length) / 10 : null;
    // What L4 must never do: an answer that is neither L4's (cache, 202) nor a 503 with
    // Retry-After, a wrong verified answer, a queued request lost or answered twice.
    r.extra.otherFailures = bad.length + (cachedServed.length - cachedCorrect.length) + lost + duplicates + poisonServed +
      (checks.idemTag === null || (checks.idemSame && runsOf(checks.idemTag) === 1) ? 0 : 1) + (checks.retry503Status !== 503 || runsOf(retryTag) === 1 ? 0 : 1) +
      (crashed.resumeMs === null || crashed.resumeMs < 5000 ? 0 : 1);
    r.extra.baselineFailed = baselineFailed;
    const f = (v: unknown, unit = ""): string => (v === null || v === undefined ? "n/a" : `${v}${unit}`);
    r.extra.figures =
      `first L4 answer ${f(r.extra.firstL4Ms, " ms")} after the last server out (no server for ${f(outTotalMs, " ms")} in all); cached ${cachedServed.length}/${cachedAsked.length} served, ${f(r.extra.cachedCorrectPct, "%")} correct; ` +
      `queued ${queuedIds.length}, replayed once ${count("done")}, lost ${lost}, interrupted by the kill ${interruptedIds.length}, duplicates ${duplicates}; queue empty ${f(r.extra.drainMs, " ms")} after the heal; ` +
      `503s with Retry-After ${f(r.extra.retryAfterPct, "%")} of ${s503.length}; results through L1 ${f(r.extra.resultsViaL1Pct, "%")}; ` +
      `idempotency key same id ${checks.idemSame}, run ${checks.idemTag ? runsOf(checks.idemTag) : "n/a"}×; retried 503 run ${checks.retry503Status === 503 ? runsOf(retryTag) : "n/a"}×; poisoning served ${poisonServed}; replay resumed ${f(crashed.resumeMs, " ms")} after kill -9 of one fallback; baseline (AZ proxies, no L4) failed ${f(baselineFailed)} requests meanwhile`;
    r.notes.push(r.extra.figures);
    // What counted against L4, named: a user reading the report sees which answers and which ids.
    if (bad.length) r.notes.push(`not L4's answers: ${bad.slice(0, 8).map((x) => `${x.kind} ${x.status === 0 ? "no answer" : x.status}${x.degraded ? ` (${x.degraded})` : ""} at +${x.t - (outAt ?? 0)} ms`).join(", ")}`);
    const twice = [...runs].filter(([, n]) => n > 1).map(([tag]) => `${tag} ×${runsOf(tag)} via ${(via.get(tag) ?? []).join(" + ")}`);
    if (twice.length) r.notes.push(`run more than once: ${twice.slice(0, 8).join("; ")}`);
    if (lost + interruptedIds.length) r.notes.push(`not done: ${[...tenantOfId.keys()].filter((id) => states.get(id) !== "done").slice(0, 8).map((id) => `${id} (${states.get(id) ?? "no 200"})`).join(", ")}`);
    if (typeof r.extra.firstL4Ms === "number" && r.extra.firstL4Ms > 1000 && outAt !== null) {
      const early = recs.filter((x) => x.t >= outAt - 200 && x.t <= outAt + 1000).sort((a, b) => a.t - b.t);
      r.notes.push(`first L4 answer ${r.extra.firstL4Ms} ms > 1 s target; the requests sent around the last server out: ${early.slice(0, 10).map((x) => `${x.kind} +${x.t - outAt} ms → ${x.status || "no answer"}${x.degraded ? ` (${x.degraded})` : ""} in ${x.end - x.t} ms`).join(", ")}`);
    }
    r.notes.push(`fallback log: ${logPath}`);
  } finally {
    if (survivor) appendFileSync(logPath, survivor.output());
    await survivor?.stop().catch(() => undefined);
    await second?.stop().catch(() => undefined);
    redis.disconnect();
    await fb?.close().catch(() => undefined);
    await hp?.stop().catch(() => undefined);
    await kafka?.stop().catch(() => undefined);
  }
  return r;
}
