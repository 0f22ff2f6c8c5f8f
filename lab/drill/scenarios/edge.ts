/**
 * The public edge under attack and under change:
 *   `edge-auth`  — no key, a bad key, malformed headers and a key revoked mid-run are refused
 *                  by the proxy (0 requests reach a server), and a key rotated under traffic
 *                  costs its client 0 failed requests;
 *   `edge-flood` — an unauthenticated flood at ≥ 10× the legitimate rate plus one tenant far
 *                  over its limit: the other tenants' p50 within 10 % of the quiet phase, the
 *                  noisy tenant gets 429 + Retry-After, no server leaves rotation.
 */
import { sleep } from "../../../agent/src/util/net";
import { paced, pacedInChild, post, type Sent } from "../paced";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_MODEL, type DrillAz } from "../stack";
import { l1Removed } from "../timeline";
import { taggedRuns } from "./outage-l4";
import { blank, finish, mark, steady, type RunResult, type ScenarioContext } from "./runner";

/** A chat the fakes count by tag (`l4#<tag>` opening the last message): every copy that reached a server is seen. */
const tagged = (tag: string): { path: string; body: string } => ({
  path: "/v1/chat/completions",
  body: JSON.stringify({ model: DRILL_MODEL, messages: [{ role: "user", content: `l4#${tag} refused?` }], max_tokens: 1 }),
});

const url = (ctx: ScenarioContext, az: DrillAz): string => `http://${az.address}:${ctx.stack.port}`;
const p50 = (xs: number[]): number | null => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] : null);

/** What a flood cost requests through the edge, against the same requests sent past it in the same moments. */
export interface SameMomentSlowdown {
  quietP50Ms: number | null;
  floodP50Ms: number | null;
  /** Through the edge: p50 under the flood over quiet. */
  rawP50Ratio: number | null;
  directQuietP50Ms: number | null;
  directFloodP50Ms: number | null;
  /** Straight to the servers: what the machine's load (the flood's own processes, any neighbour) cost. */
  directP50Ratio: number | null;
  /** The edge's own slowdown, judged: the ratio through the edge over the ratio past it. */
  floodP50Ratio: number | null;
}

/** p50s of the successful requests of `through` (the edge) and `direct` (past it) in the quiet and flooded windows `[from, to)`. */
export function sameMomentSlowdown(through: readonly Sent[], direct: readonly Sent[], quiet: readonly [number, number], flooded: readonly [number, number]): SameMomentSlowdown {
  const within = (xs: readonly Sent[], [from, to]: readonly [number, number]): number | null => p50(xs.filter((s) => s.t >= from && s.t < to && s.status === 200).map((s) => s.ms));
  const ratio = (a: number | null, b: number | null): number | null => (a && b ? b / a : null);
  const round = (x: number | null, k: number): number | null => (x === null ? null : Math.round(x * k) / k);
  const [q, f, dq, df] = [within(through, quiet), within(through, flooded), within(direct, quiet), within(direct, flooded)];
  const [raw, dir] = [ratio(q, f), ratio(dq, df)];
  return {
    quietP50Ms: round(q, 100), floodP50Ms: round(f, 100), rawP50Ratio: round(raw, 1000),
    directQuietP50Ms: round(dq, 100), directFloodP50Ms: round(df, 100), directP50Ratio: round(dir, 1000),
    floodP50Ratio: round(raw !== null && dir !== null ? raw / dir : null, 1000),
  };
}

export async function runEdgeAuth(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const { store, sync } = ctx.stack.edge;
  const applied = async (): Promise<void> => {
    const want = await store.revision();
    for (let i = 0; i < 100 && sync.state.revision !== want; i++) await sleep(50);
  };
  // The refused requests carry a tag the fake servers count: any copy that reached a server is seen.
  const other = ctx.stack.azs[1] ?? ctx.stack.azs[0];
  const busy = ctx.stack.azs[0];
  const tag = `edge-refused-${run}-${Date.now()}`;
  const revoked = await store.add(`edge-revoked-${run}`, { rps: 1000, concurrency: 100 }, "drill edge-auth");
  const rotated = await store.add(`edge-rotated-${run}`, { rps: 1000, concurrency: 100 }, "drill edge-auth");
  await applied();
  r.injectAt = mark(ctx, "inject", `${spec.name}: refused clients, a revocation and a rotation`);
  // The revoked tenant's client on one AZ proxy, the rotated tenant's on another.
  let rotKey = rotated.key;
  const victim = paced(() => url(ctx, other), () => ({ authorization: `Bearer ${revoked.key}` }), 20, ctx.now);
  const rot = paced(() => url(ctx, busy), () => ({ authorization: `Bearer ${rotKey}` }), 20, ctx.now);
  const bad: Record<string, string | string[]>[] = [
    {},
    { authorization: "Bearer sk-llmha-0000000000-not-a-key-of-this-cluster-at-all-xxxxxxxx" },
    { authorization: "Basic dXNlcjpwYXNz" },
    { authorization: "Bearer" },
    { authorization: `Bearer ${revoked.key};drop` },
    { authorization: [`Bearer ${revoked.key}`, `Bearer ${revoked.key}`] },
    { authorization: `Bearer ${"x".repeat(100_000)}` },
  ];
  const refused = await Promise.all(Array.from({ length: 70 }, (_, i) => post(url(ctx, i % 2 ? other : busy), bad[i % bad.length], false, ctx.now, tagged(tag))));
  await sleep(1500);
  const revokeAt = ctx.now();
  await store.revoke(revoked.record.id);
  await applied();
  const appliedAt = ctx.now();
  const next = await store.rotate(rotated.record.id);
  await applied();
  rotKey = next.key; // the operator hands the new key out once every proxy has it
  await sleep(1000);
  await store.revoke(rotated.record.id);
  await applied();
  await sleep(1500);
  r.healAt = mark(ctx, "heal", `${spec.name}: done`);
  await Promise.all([victim.stop(), rot.stop()]);
  const reached = (await taggedRuns(ctx.stack.running())).runs.get(tag) ?? 0;
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  r.extra.refusedNot401 = refused.filter((s) => s.status !== 401).length;
  r.extra.refusedMaxMs = Math.round(Math.max(...refused.map((s) => s.ms)) * 10) / 10;
  // After the revocation had reached every proxy (plus requests already under way).
  r.extra.revokedAccepted = victim.records.filter((s) => s.t > appliedAt + 100 && s.status !== 401).length;
  r.extra.revokeAppliedMs = appliedAt - revokeAt;
  r.extra.rotationFailed = rot.records.filter((s) => s.status !== 200).length;
  r.extra.refusedReached = reached;
  r.extra.figures =
    `${refused.length} refused requests (no key, bad key, malformed, 100 KB header): ${refused.length - (r.extra.refusedNot401 as number)} got 401, slowest ${r.extra.refusedMaxMs} ms, ` +
    `${r.extra.refusedReached ?? "?"} reached a server; revocation applied in ${r.extra.revokeAppliedMs} ms, ${r.extra.revokedAccepted} accepted after; ` +
    `rotation under traffic: ${rot.records.length} requests, ${r.extra.rotationFailed} failed`;
  r.notes.push(r.extra.figures);
  return r;
}

export async function runEdgeFlood(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const r = blank(spec.name, run);
  if (!(await steady(ctx))) r.notes.push("fleet not steady before injection");
  const { store, sync } = ctx.stack.edge;
  const good = await Promise.all([1, 2].map((i) => store.add(`edge-good${i}-${run}`, { rps: 1000, concurrency: 100 }, "drill edge-flood")));
  const noisy = await store.add(`edge-noisy-${run}`, { rps: 5, concurrency: 4 }, "drill edge-flood: far over its limit");
  const want = await store.revision();
  for (let i = 0; i < 100 && sync.state.revision !== want; i++) await sleep(50);
  const active = ctx.stack.azs.filter((a) => !a.standby);
  let rr = 0;
  const target = (): string => url(ctx, active[rr++ % active.length]);
  const legitPerS = 20;
  // The flood and the noisy tenant come from processes of their own, as they would from other hosts
  // (started before the quiet window: a process start-up would weigh on the quiet figure).
  const urls = active.map((a) => url(ctx, a));
  const epochMs = Date.now() - ctx.now();
  const [floodChild, loudChild] = await Promise.all([
    pacedInChild({ urls, headers: {}, perS: 10 * legitPerS + 50, epochMs }),
    pacedInChild({ urls, headers: { authorization: `Bearer ${noisy.key}` }, perS: 50, epochMs }),
  ]);
  const legit = good.map((g) => paced(target, () => ({ authorization: `Bearer ${g.key}` }), legitPerS / 2, ctx.now));
  // The baseline in the same moment: the same requests at the same rate straight to the servers,
  // past the edge. Both series feel what the machine feels (the flood's own processes, any
  // neighbour); what the flood costs the edge is the proxied series' slowdown over the direct one's.
  const servers = ctx.stack.running().filter((n) => active.some((a) => a.name === n.az));
  let sr = 0;
  const direct = paced(() => servers[sr++ % servers.length].inferenceUrl, () => ({}), legitPerS / 2, ctx.now);
  await sleep(8000);
  r.injectAt = mark(ctx, "inject", `${spec.name}: unauthenticated flood at ${10 * legitPerS + 50}/s and a tenant at 10× its limit`);
  floodChild.go();
  loudChild.go();
  await sleep(8000);
  r.healAt = mark(ctx, "heal", `${spec.name}: flood stopped`);
  const [floodRecords, loudRecords] = await Promise.all([floodChild.stop(), loudChild.stop()]);
  const flood = { records: floodRecords };
  const loud = { records: loudRecords };
  await sleep(1000);
  await Promise.all([...legit, direct].map((l) => l.stop()));
  r.endAt = ctx.now();
  finish(ctx, r, [], l1Removed);
  const recs = legit.flatMap((l) => l.records);
  Object.assign(r.extra, sameMomentSlowdown(recs, direct.records, [r.injectAt - 6000, r.injectAt], [r.injectAt + 500, r.healAt]));
  r.extra.legitFailed = recs.filter((s) => s.status !== 200).length;
  r.extra.floodSent = flood.records.length;
  r.extra.floodNot401 = flood.records.filter((s) => s.status !== 401).length;
  const limited = loud.records.filter((s) => s.status === 429);
  r.extra.noisy429 = limited.length;
  // The noisy tenant must be limited, each refusal saying when to come back.
  r.extra.noisyUnlimited = limited.length === 0 ? 1 : limited.filter((s) => !s.retryAfter).length;
  r.extra.figures =
    `legit p50 ${r.extra.quietP50Ms} ms quiet → ${r.extra.floodP50Ms} ms under the flood (×${r.extra.rawP50Ratio}; straight to the servers ×${r.extra.directP50Ratio}: the edge's own ×${r.extra.floodP50Ratio}), ${r.extra.legitFailed} legit failed; ` +
    `flood ${flood.records.length} requests (${r.extra.floodNot401} not 401); noisy tenant ${limited.length} of ${loud.records.length} got 429 + Retry-After`;
  r.notes.push(r.extra.figures);
  return r;
}
