/**
 * Proxy scenarios under field-like traffic (`workload.ts`, the official `openai` client), each
 * judging what the HAProxy generator's defaults do with real requests: a query of death (one
 * request that kills the server it reaches may cost one server, not more), a crash under 64 KB
 * prompts (only the requests in flight on the dead server may fail: the rest are retried),
 * overload past the per-server `maxconn` while the AZ spills to backups (health endpoints keep
 * answering, the excess gets fast 503s with `Retry-After`, nothing fails over), and the L2
 * spread (with every primary out, no backup server takes much more than its fair share), and
 * generations longer than the old server timeout (neither a 15 s answer nor a 12 s stream is cut).
 */
import { QUERY_OF_DEATH_MARKER } from "../../sim/fake-inference";
import { drillAuth } from "../credentials";
import type { SimNode } from "../../sim/sim-node";
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_MODEL, type DrillAz } from "../stack";
import { firstAfter, l1Full, l1Removed, p50max, removedBetween, type Sample } from "../timeline";
import { sendRecorded, startWorkload, type RequestRecord, type Workload, type WorkloadMix, type WorkloadOptions } from "../workload";
import { answeredMs, inferenceAlive, inFlightOf, pollEndpoints, serverMaxconnOf, sharesOf, slowest, spreadRatio, tally } from "./proxy-measure";
import { awaitRecovery, blank, finish, healthy, mark, rowOf, steady, until, type RunResult, type ScenarioContext } from "./runner";

/** The field traffic's client in the timeline and the report, beside the light `llm-ha` one. */
export const FIELD_CLIENT = "llm-ha-field";
/** Per-server `maxconn` assumed when the running configuration has none (the generator's default). */
const NOMINAL_SERVER_MAXCONN = 32;

const LONG_PROMPT_MIX: WorkloadMix = { promptBytes: [64 * 1024, 64 * 1024], maxTokens: [25, 75], streamShare: 0.5, chatShare: 0.5 };
const OVERLOAD_MIX: WorkloadMix = { promptBytes: [1024, 16 * 1024], maxTokens: [100, 250], streamShare: 0.2, chatShare: 0.5 };
// Short requests, many of them: enough for every backup's share to be judged (≥ 20 requests each).
const SPREAD_MIX: WorkloadMix = { promptBytes: [1024, 4 * 1024], maxTokens: [1, 4], streamShare: 0, chatShare: 0.5 };

const proxyUrl = (ctx: ScenarioContext, az: DrillAz): string => `http://${az.address}:${ctx.stack.port}`;
const field = (ctx: ScenarioContext, timeoutMs: number): Pick<WorkloadOptions, "client" | "timeline" | "now" | "model" | "timeoutMs"> => ({
  client: FIELD_CLIENT,
  timeline: ctx.tl,
  now: ctx.now,
  model: DRILL_MODEL,
  timeoutMs,
});
/** Short requests (1–4 KiB prompts, 1–4 tokens, not streamed): many of them, so a change of route shows at once. */
export const SHORT_MIX: WorkloadMix = { promptBytes: [1024, 4 * 1024], maxTokens: [1, 4], streamShare: 0, chatShare: 0.5 };
/**
 * Short requests straight to one AZ's proxy, `concurrency` at a time, until stopped: a client
 * that still has the AZ's address (a resolver's cache), whatever DNS answers meanwhile.
 */
export const shortThroughProxy = (ctx: ScenarioContext, az: DrillAz, concurrency: number): Workload =>
  startWorkload({ ...field(ctx, 10_000), target: () => proxyUrl(ctx, az), mix: SHORT_MIX, concurrency });
const fmt = (ms: number | null | undefined): string => (typeof ms === "number" ? `${(ms / 1000).toFixed(2)}s` : "never");
/** Field requests that failed and ended in [from, to] (their start may be earlier: in flight at the fault). */
const failedIn = (recs: readonly RequestRecord[], from: number, to: number): RequestRecord[] => recs.filter((x) => !x.ok && x.end >= from && x.t <= to);

/** One request carrying the query-of-death marker through one AZ's proxy; the crashed servers are restarted (as the kubelet would). */
export async function runQueryOfDeath(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const alive = ctx.stack.running().filter(inferenceAlive);
  r.injectAt = mark(ctx, "inject", `${spec.name} via ${az.name}`);
  const shape = spec.name === "query-of-death-stream" ? "completion-stream" : "chat";
  const rec = await sendRecorded(field(ctx, 10_000), proxyUrl(ctx, az), { shape, promptBytes: 2048, maxTokens: 16, marker: QUERY_OF_DEATH_MARKER });
  // Retries, if any, happen within milliseconds; give the processes time to be reaped.
  await sleep(1500);
  const crashed = alive.filter((n) => !inferenceAlive(n));
  await until(ctx, 4000, (s) => crashed.every((n) => l1Removed(s.l1[rowOf(ctx, n)])));
  r.healAt = mark(ctx, "heal", `restart ${crashed.map((n) => n.id).join(",") || "none"}`);
  // A standby node the local cloud stops meanwhile (its wake released) cannot be restarted: noted, not fatal.
  const restarts = await Promise.allSettled(crashed.map((n) => n.startInference("ready")));
  restarts.forEach((x, i) => x.status === "rejected" && r.notes.push(`${crashed[i].id} not restarted: ${(x.reason as Error).message}`));
  const back = (s: Sample): boolean => crashed.every((n) => healthy(ctx, s, n));
  if (!(await until(ctx, 30_000, back))) r.notes.push(`${crashed.map((n) => n.id).join(",")} not back at full weight in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, back);
  await sleep(300);
  r.endAt = ctx.now();
  finish(ctx, r, crashed, l1Removed);
  r.failed += rec.ok ? 0 : 1;
  r.extra.crashedServers = crashed.length > 0 ? crashed.length : null;
  r.extra.crashed = crashed.map((n) => n.id).join(",");
  r.extra.requestOutcome = rec.ok ? "served" : (rec.why ?? "failed");
  r.extra.requestMs = rec.end - rec.t;
  if (crashed.length === 0) r.notes.push("the request crashed no server: no query of death was measured");
  r.extra.figures =
    `one request through ${az.name}'s proxy crashed ${crashed.length} inference server(s)${crashed.length ? ` (${r.extra.crashed})` : ""}; ` +
    `the client got ${r.extra.requestOutcome} after ${fmt(r.extra.requestMs)}; back at full weight ${fmt(r.recoveryMs)} after the restart`;
  r.notes.push(r.extra.figures);
  return r;
}

/** What the long-generation scenario sends: longer than the 10 s server timeout the drill used to run (and far under production's 600 s). */
export const LONG_GENERATIONS = [
  { shape: "chat", promptBytes: 32 * 1024, maxTokens: 750 },
  { shape: "completion-stream", promptBytes: 8 * 1024, maxTokens: 600 },
] as const;

/**
 * A 15 s non-streaming generation (the proxy sees no byte of the answer until it is whole) and a
 * 12 s stream, through one AZ's proxy: HAProxy's `timeout server` must not cut either. No
 * fault is injected; the scenario fails when either request fails or comes back short.
 */
export async function runLongGeneration(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  r.injectAt = mark(ctx, "inject", `${spec.name} via ${az.name}`);
  const recs = await Promise.all(LONG_GENERATIONS.map((g) => sendRecorded(field(ctx, 60_000), proxyUrl(ctx, az), g)));
  r.healAt = mark(ctx, "heal", "both answered");
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  const bad = recs.filter((x) => !x.ok);
  r.failed += bad.length;
  r.extra.longestMs = Math.max(...recs.map((x) => x.end - x.t));
  r.extra.figures = recs
    .map((x) => `${x.shape} of ${x.maxTokens} tokens (${x.promptBytes / 1024} KB prompt): ${x.ok ? `${x.tokens} tokens` : (x.why ?? "failed")} in ${fmt(x.end - x.t)}`)
    .join("; ");
  r.notes.push(`through ${az.name}'s proxy: ${r.extra.figures}`);
  return r;
}

/** 64 KB prompts at a steady rate through one AZ's proxy; one of its inference servers SIGKILLed, then started again. */
export async function runLongPromptCrash(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const victim = ctx.stack.nodes.filter((n) => n.az === az.name)[0];
  const ratePerS = 10;
  const wl = startWorkload({ ...field(ctx, 20_000), target: () => proxyUrl(ctx, az), mix: LONG_PROMPT_MIX, ratePerS });
  await sleep(3000);
  // Read just before the kill: what the dead server takes with it (a request arriving in between is a miss the target shows).
  const inFlight = await inFlightOf(victim);
  r.injectAt = mark(ctx, "inject", `${spec.name} ${victim.id}`);
  await victim.crashInference();
  await until(ctx, 8000, (s) => l1Removed(s.l1[rowOf(ctx, victim)]));
  await sleep(1000);
  r.healAt = mark(ctx, "heal", `heal ${victim.id}`);
  await victim.startInference("ready");
  if (!(await until(ctx, 30_000, (s) => healthy(ctx, s, victim)))) r.notes.push(`${victim.id} not back at full weight in 30 s`);
  r.recoveryMs = firstAfter(ctx.tl.samples, r.healAt, (s) => healthy(ctx, s, victim));
  await sleep(1000);
  r.endAt = ctx.now();
  await wl.stop();
  finish(ctx, r, [victim], l1Removed);
  const failed = failedIn(wl.records, r.injectAt, r.endAt);
  r.failed += failed.length;
  r.extra.promptBytes = LONG_PROMPT_MIX.promptBytes[0];
  r.extra.ratePerS = ratePerS;
  r.extra.sent = wl.records.filter((x) => x.end >= r.injectAt && x.t <= r.endAt).length;
  r.extra.inFlightAtKill = inFlight;
  r.extra.failedAfterKill = failed.length;
  r.extra.failedBeyondInFlight = inFlight === null ? null : Math.max(0, failed.length - inFlight);
  r.extra.failReasons = tally(failed.map((x) => `${x.why ?? "?"} (${x.shape})`));
  r.extra.figures =
    `${r.extra.promptBytes / 1024} KB prompts at ${ratePerS}/s through ${az.name}'s proxy: ${inFlight ?? "?"} in flight on ${victim.id} at the kill, ` +
    `${failed.length} failed${failed.length ? ` (${r.extra.failReasons})` : ""}, ${r.extra.failedBeyondInFlight ?? "?"} beyond those; ${r.extra.sent} requests in the window`;
  r.notes.push(r.extra.figures);
  return r;
}

/** Times an active AZ other than `az` was missing from a DNS answer in [from, to]: a failover nobody asked for. */
function dnsLosses(ctx: ScenarioContext, az: DrillAz, from: number, to: number): number {
  const others = ctx.stack.azs.filter((a) => !a.standby && a !== az).map((a) => a.address);
  let lost = false;
  let n = 0;
  for (const s of ctx.tl.samples) {
    if (s.t < from || s.t > to || s.dns === null) continue;
    const now = others.some((a) => !s.dns!.includes(a));
    if (now && !lost) n++;
    lost = now;
  }
  return n;
}

/** One AZ's GPUs lost (its traffic spills to the backups), then its proxy driven at 3× one AZ's capacity for 10 s. */
export async function runOverload(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const healthyOthers = ctx.stack.running().filter((n) => n.az !== az.name);
  const maxconn = az.haproxy ? serverMaxconnOf(az.haproxy.configPath) : null;
  const capacity = victims.length * (maxconn ?? NOMINAL_SERVER_MAXCONN);
  const concurrency = 3 * capacity;
  r.injectAt = mark(ctx, "inject", `${spec.name} ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
  await until(ctx, 10_000, (s) => victims.every((n) => l1Removed(s.l1[rowOf(ctx, n)])));
  // The leader wakes the standby AZ: two processes boot per node, which on two cores takes every
  // CPU for seconds. Overload the spilled, settled state (the standby then serving as backups too).
  const spares = ctx.fleetWired && ctx.stack.standby ? ctx.stack.nodes.filter((n) => n.az === ctx.stack.standby!.name) : [];
  if (spares.length && !(await until(ctx, 20_000, (s) => spares.every((n) => healthy(ctx, s, n) && l1Full(s.l1[`${az.proxy}/${n.id}`]))))) {
    r.notes.push("standby not serving 20 s after the fault: overloading without it");
  }
  await sleep(1000);
  const serving = [...healthyOthers, ...spares.filter((n) => n.running)];
  // From a process of its own: the health endpoints, and four canary clients sending 1-token
  // completions through the proxy (what one more client gets: served after a wait in the queue,
  // or refused).
  const canaryTarget = { url: `${proxyUrl(ctx, az)}/v1/completions`, body: { model: DRILL_MODEL, prompt: "canary", max_tokens: 1 }, headers: drillAuth("ops") };
  const polls = pollEndpoints(
    [{ url: `http://${az.address}:${ctx.stack.monitorPort}/healthz` }, { url: `http://${az.address}:${ctx.stack.azHealthPort}/az/health` }, ...Array<typeof canaryTarget>(4).fill(canaryTarget)],
    ctx.now,
  );
  const loadAt = ctx.now();
  const wl = startWorkload({ ...field(ctx, 30_000), target: () => proxyUrl(ctx, az), mix: OVERLOAD_MIX, concurrency });
  await sleep(10_000);
  const loadEnd = ctx.now();
  await wl.stop();
  await polls.stop();
  const [healthz, azHealth, ...canaries] = polls.polls.map((p) => p.filter((x) => x.t >= loadAt && x.t <= loadEnd));
  const canary = canaries.flat();
  r.healAt = mark(ctx, "heal", `heal ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault(null)));
  await awaitRecovery(ctx, r, az.name, (s) => victims.every((n) => healthy(ctx, s, n)) && s.dns !== null && s.dns.includes(az.address));
  await sleep(300);
  r.endAt = ctx.now();
  finish(ctx, r, victims, l1Removed);
  // The other AZs' nodes as backups in the hurt AZ's proxy must stay in rotation too, and their AZs in DNS.
  const backupRows = healthyOthers.map((n) => `${az.proxy}/${n.id}`);
  const falseRows = removedBetween(ctx.tl, backupRows, r.injectAt, r.healAt);
  // A standby node serving when the load began must stay in rotation through it.
  const spareRows = serving.filter((n) => !healthyOthers.includes(n)).map((n) => `${az.proxy}/${n.id}`);
  falseRows.push(...removedBetween(ctx.tl, spareRows, loadAt, loadEnd));
  const dnsLost = dnsLosses(ctx, az, r.injectAt, r.endAt);
  r.falseFailovers += falseRows.length + dnsLost;
  r.crossMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => victims.every((n) => l1Removed(s.l1[rowOf(ctx, n)])), r.healAt);
  r.dnsMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => s.dns !== null && !s.dns.includes(az.address), r.healAt);
  const recs = wl.records.filter((x) => x.t >= loadAt);
  const r503 = recs.filter((x) => x.status === 503);
  const other = recs.filter((x) => !x.ok && x.status !== 503);
  const field503 = p50max(r503.map((x) => x.end - x.t));
  const canary503 = canary.filter((x) => x.status === 503);
  // Judged: each 503's time less the poller's own lateness meanwhile (a neighbour that delays the
  // measuring process must not read as a slow proxy); the raw times are reported beside it.
  const lat = p50max(canary503.map(answeredMs));
  const raw503 = p50max(canary503.map((x) => x.ms));
  const pollerLag = p50max(canary503.map((x) => x.lagMs));
  r.failed += recs.filter((x) => !x.ok).length;
  Object.assign(r.extra, {
    concurrency,
    serverMaxconn: maxconn,
    loadMs: loadEnd - loadAt,
    sent: recs.length,
    served: recs.filter((x) => x.ok).length,
    refused503: r503.length,
    fieldP50503Ms: field503?.p50 ?? null,
    fieldMax503Ms: field503?.max ?? null,
    canary: tally(canary.map((x) => String(x.status ?? "none"))),
    p50503Ms: lat?.p50 ?? null,
    max503Ms: lat?.max ?? null,
    rawMax503Ms: raw503?.max ?? null,
    pollerLagMaxMs: pollerLag?.max ?? null,
    retryAfterMissing: r503.filter((x) => !x.retryAfter).length + canary503.filter((x) => !x.retryAfter).length,
    otherFailures: other.length,
    otherReasons: tally(other.map((x) => x.why ?? "?")),
    healthzMaxMs: slowest(healthz),
    azHealthMaxMs: slowest(azHealth),
    healthMaxMs: Math.max(slowest(healthz) ?? Infinity, slowest(azHealth) ?? Infinity),
    healthPolls: healthz.length + azHealth.length,
    healthUnanswered: [...healthz, ...azHealth].filter((p) => p.status === null).length,
    azHealthStatus: tally(azHealth.map((p) => String(p.status ?? "none"))),
    servingBackups: serving.map((n) => n.id).join(","),
    falseRows: falseRows.join(","),
    dnsLost,
  });
  if (!Number.isFinite(r.extra.healthMaxMs as number)) r.extra.healthMaxMs = null;
  r.extra.figures =
    `${concurrency} clients on ${az.name}'s proxy for ${fmt(loadEnd - loadAt)} (3 × one AZ: ${victims.length} servers × maxconn ${maxconn ?? "none"}), ` +
    `served by ${serving.length} backups: ${r.extra.served} served, ${r503.length} 503 (client p50 ${fmt(field503?.p50)}, max ${fmt(field503?.max)}), ` +
    `${other.length} other failures${other.length ? ` (${r.extra.otherReasons})` : ""}; canaries from an idle process: ${r.extra.canary || "none"}, ` +
    `503 p50 ${fmt(lat?.p50)} max ${fmt(lat?.max)} (as measured ${fmt(raw503?.max)}, the poller late by up to ${fmt(pollerLag?.max)}); ${r.extra.retryAfterMissing} 503s without Retry-After; /healthz max ${fmt(r.extra.healthzMaxMs as number | null)}, ` +
    `/az/health max ${fmt(r.extra.azHealthMaxMs as number | null)} over ${r.extra.healthPolls} polls (${r.extra.healthUnanswered} unanswered); ` +
    `false failovers ${r.falseFailovers}${falseRows.length ? ` (${falseRows.join(",")})` : ""}${dnsLost ? `, DNS lost a healthy AZ ${dnsLost}×` : ""}`;
  r.notes.push(r.extra.figures);
  return r;
}

/** Every primary of one AZ out (GPUs lost) under steady traffic at its proxy: how the backups share it. */
export async function runL2Spread(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const az = ctx.stack.azs[0];
  const victims = ctx.stack.nodes.filter((n) => n.az === az.name);
  const backups: SimNode[] = ctx.stack.nodes.filter((n) => n.az !== az.name);
  const rows = backups.map((n) => `${az.proxy}/${n.id}`);
  const wl = startWorkload({ ...field(ctx, 10_000), target: () => proxyUrl(ctx, az), mix: SPREAD_MIX, concurrency: 12 });
  await sleep(1000);
  r.injectAt = mark(ctx, "inject", `${spec.name} ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault("gpuLost")));
  await until(ctx, 10_000, (s) => victims.every((n) => l1Removed(s.l1[rowOf(ctx, n)])));
  const from = ctx.now();
  await sleep(8000);
  const to = ctx.now();
  r.healAt = mark(ctx, "heal", `heal ${az.name}`);
  await Promise.all(victims.map((n) => n.gpuFault(null)));
  await awaitRecovery(ctx, r, az.name, (s) => victims.every((n) => healthy(ctx, s, n)));
  await sleep(300);
  r.endAt = ctx.now();
  await wl.stop();
  finish(ctx, r, victims, l1Removed);
  r.crossMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => victims.every((n) => l1Removed(s.l1[rowOf(ctx, n)])), r.healAt);
  r.dnsMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => s.dns !== null && !s.dns.includes(az.address), r.healAt);
  r.failed += failedIn(wl.records, r.injectAt, r.endAt).length;
  const { shares, judgedMs } = sharesOf(ctx.tl.samples, rows, from, to);
  const ratio = spreadRatio(shares);
  r.extra.spreadRatio = ratio === null ? null : Math.round(ratio * 100) / 100;
  r.extra.windowMs = to - from;
  r.extra.judgedMs = judgedMs;
  r.extra.shares = shares.map((s) => `${s.row.split("/")[1]}:${s.requests}/${s.fair.toFixed(1)}`).join(",");
  r.extra.figures =
    `${az.name}'s proxy with every primary out for ${fmt(to - from)} (${fmt(judgedMs)} with every backup at full weight or out): ` +
    shares.map((s) => `${s.row.split("/")[1]} ${s.requests} (fair ${s.fair.toFixed(1)})`).join(", ") +
    `: busiest backup ${ratio === null ? "?" : ratio.toFixed(2)}× its fair share`;
  r.notes.push(r.extra.figures);
  return r;
}
