/**
 * The operator's side of a rollout against a real redis-server: `llm-ha rollout` (its entry
 * function, as bin/llm-ha runs it) reads the fleet first, refuses what the leader would refuse
 * (no data, no leader, a rollout under way, the revision served already, a phase an op does not
 * apply to) writing nothing, else writes the request the leader acts on; `status` shows the
 * steps, the one under way, the gates and the reason; `--wait` follows a rollout the test plays
 * the leader of to its end, with its exit code; `llm-ha status` carries the rollout (a section,
 * the JSON, the `rollout` events). The leader's writes go through the fenced-hset script, as the
 * leader's own do.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../agent/src/cli";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { fencedHsetScript } from "../../agent/src/fleet/redis/scripts";
import type { RolloutState } from "../../agent/src/fleet/rollout/types";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { toText } from "../../agent/src/ops/status/lines";
import { rolloutView } from "../../agent/src/ops/status/rollout";
import { rolloutSection } from "../../agent/src/ops/status/rollout-render";
import { runInProcess } from "../support/in-process";

const IMAGE = `registry.example/vllm@sha256:${"ab".repeat(32)}`;

async function llmha(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runInProcess(main, args, { cleanLlmha: true });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

/** A rollout in step 2 of 3 (az-a), baking, with every gate's verdict. */
function baking(now: number, over: Partial<RolloutState> = {}): RolloutState {
  return {
    id: "r-42",
    from: { revision: "rev-a" },
    to: { revision: "rev-b", image: IMAGE },
    steps: [
      { index: 0, az: "az-c", kind: "standby", nodes: ["c1", "c2"], switched: ["c1", "c2"] },
      { index: 1, az: "az-a", kind: "az", nodes: ["a1", "a2"], switched: ["a1", "a2"] },
      { index: 2, az: "az-b", kind: "az", nodes: ["b1", "b2"], switched: [] },
    ],
    step: 1,
    phase: "baking",
    startedAt: now - 900_000,
    since: now - 60_000,
    switchedAt: now - 60_000,
    bakeMs: 300_000,
    gates: [
      { gate: "canary", verdict: "pass", detail: "5 of 5 canary answers as recorded on rev-b" },
      { gate: "errors", verdict: "pass", detail: "rev-b 0.0% of 240 probes failed, rev-a 0.0% of 240" },
      { gate: "latency", verdict: "wait", detail: "p50 rev-b 41 ms vs rev-a 40 ms: too few probes yet (12 of 30)" },
      { gate: "continuation", verdict: "pass", detail: "resume requests answered on 2 of 2 nodes" },
      { gate: "load-time", verdict: "pass", detail: "loads 212 s, 3x the old median 190 s allows 570 s" },
      { gate: "corruption", verdict: "pass", detail: "0 corrupted requests reported" },
      { gate: "capacity", verdict: "pass", detail: "az-a 16/16 GPUs, floor 12" },
    ],
    reason: "every node of az-a serves rev-b; baking",
    by: "operator",
    updatedAt: now - 1000,
    ...over,
  };
}

/** A rollout whose latency gate failed in step 2: rev-a restored everywhere. */
function rolledBack(now: number): RolloutState {
  const b = baking(now);
  return {
    ...b,
    phase: "rolled-back",
    since: now - 120_000,
    steps: b.steps.map((s) => ({ ...s, switched: s.index < 2 ? [...s.nodes] : [] })),
    gates: b.gates.map((g) => (g.gate === "latency" ? { ...g, verdict: "fail", detail: "p50 rev-b 71 ms vs rev-a 40 ms: +78%, over 20% and 5 ms" } : g)),
    reason: "latency failed in az-a: p50 rev-b 71 ms vs rev-a 40 ms: +78%, over 20% and 5 ms",
  };
}

describe("llm-ha rollout and the rollout in llm-ha status", () => {
  let server: RedisServerHandle;
  let c: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    c = new Redis(server.url);
  });
  afterAll(async () => {
    c?.disconnect();
    await server?.stop();
  });

  /** A fleet as a leader leaves it: the lease (unless `leader: false`), the tier, the fence. */
  async function seed(cluster: string, o: { leader?: boolean; tier?: string } = {}): Promise<RedisKeys> {
    const k = new RedisKeys(cluster);
    await c.hset(k.tier, { level: o.tier ?? "L0", reason: o.tier && o.tier !== "L0" ? "az-b degraded" : "all AZs serve", updatedAt: Date.now() });
    await c.hset(k.fenceLast, { token: 7, holder: "n1/100" });
    if (o.leader !== false) await c.set(k.leader, "n1/100:7", "PX", 60_000);
    return k;
  }
  /** The leader's write of the `rollout` hash, fenced, with its `rollout` event. */
  async function leaderWrites(k: RedisKeys, s: RolloutState, current = s.from.revision): Promise<void> {
    const active = !["promoted", "rolled-back", "aborted"].includes(s.phase);
    const r = await fencedHsetScript(c, {
      fenceLast: k.fenceLast, target: k.rollout, events: k.events, token: 7, holder: "n1/100", eventType: "rollout", eventsMaxLen: 1000,
      fields: { state: JSON.stringify(s), id: s.id, phase: s.phase, step: s.step, current, allow: active ? `${s.from.revision},${s.to.revision}` : current, updatedAt: s.updatedAt },
    });
    expect(r.accepted).toBe(true);
  }
  const request = async (k: RedisKeys): Promise<Record<string, unknown> | null> => {
    const v = await c.get(k.rolloutRequest);
    return v ? (JSON.parse(v) as Record<string, unknown>) : null;
  };
  const fleet = (cluster: string): string[] => ["--redis-url", server.url, "--cluster", cluster];

  it("start writes the request (JSON, Redis time) the leader acts on, and says what happens next", async () => {
    const k = await seed("ro-start");
    const r = await llmha(["rollout", "start", ...fleet("ro-start"), "--to", "rev-b", "--image", IMAGE, "--bake", "120", "--id", "r-1"]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("rollout r-1 requested at ");
    expect(r.out).toContain(`for cluster ro-start: the fleet's revision → rev-b (image ${IMAGE}), bake 120 s per step`);
    expect(r.out).toContain("the leader (n1) acts on it on its next period: the standby AZ first (or one canary node), then each AZ in turn");
    const req = await request(k);
    expect(req).toMatchObject({ op: "start", id: "r-1", to: { revision: "rev-b", image: IMAGE }, bakeMs: 120_000, by: "operator" });
    expect(Math.abs(Number(req!.at) - Date.now())).toBeLessThan(5000);
    expect(await c.pttl(k.rolloutRequest)).toBeGreaterThan(0);

    // Without --id: rollout-<UTC date-time>; the pending request refuses a second start.
    const again = await llmha(["rollout", "start", ...fleet("ro-start"), "--to", "rev-c"]);
    expect(again.code).toBe(4);
    expect(again.err).toContain("llm-ha rollout: not requested: a start request (r-1,");
    await c.del(k.rolloutRequest);
    const auto = await llmha(["rollout", "start", ...fleet("ro-start"), "--to", "rev-c", "-o", "json"]);
    expect(auto.code, auto.err).toBe(0);
    const doc = JSON.parse(auto.out) as { request: { id: string; op: string } };
    expect(doc.request.id).toMatch(/^rollout-\d{8}-\d{6}$/);
    expect((await request(k))!.id).toBe(doc.request.id);

    // A request no leader took for over a minute (refused, or no leader ran) is overdue: status says so, a new start replaces it.
    await c.set(k.rolloutRequest, JSON.stringify({ op: "start", id: "r-stuck", at: Date.now() - 120_000, to: { revision: "rev-x" }, by: "operator" }));
    expect((await llmha(["status", ...fleet("ro-start"), "-o", "wide"])).out).toMatch(/\nrollout {2}requested 2m ago: start r-stuck to rev-x, not acted on: refused by the leader, or no leader runs\n/);
    const replace = await llmha(["rollout", "start", ...fleet("ro-start"), "--to", "rev-d", "--id", "r-2"]);
    expect(replace.code, replace.err).toBe(0);
    expect(replace.err).toContain("replacing the start request r-stuck, not acted on in 120 s");
    expect(await request(k)).toMatchObject({ id: "r-2", to: { revision: "rev-d" } });
  }, 30_000);

  it("start refuses, writing nothing: no data, no leader, a rollout under way, the revision served already, an incident", async () => {
    const empty = await llmha(["rollout", "start", ...fleet("ro-empty"), "--to", "rev-b"]);
    expect(empty.code).toBe(3);
    expect(empty.err).toContain("no llm-ha data for cluster ro-empty");
    const emptyJson = await llmha(["rollout", "status", ...fleet("ro-empty"), "--json"]);
    expect(emptyJson.code).toBe(3);
    expect(JSON.parse(emptyJson.out)).toMatchObject({ version: 1, cluster: "ro-empty", error: expect.stringContaining("no llm-ha data") });

    const nl = await seed("ro-noleader", { leader: false });
    const noLeader = await llmha(["rollout", "start", ...fleet("ro-noleader"), "--to", "rev-b"]);
    expect(noLeader.code).toBe(4);
    expect(noLeader.err).toContain("not requested: no leader holds the lease: no one would carry the rollout out");
    expect(await request(nl)).toBeNull();

    const k = await seed("ro-busy");
    await leaderWrites(k, baking(Date.now()));
    const busy = await llmha(["rollout", "start", ...fleet("ro-busy"), "--to", "rev-c"]);
    expect(busy.code).toBe(4);
    expect(busy.err).toContain("rollout r-42 is under way (baking, step 2 of 3): one rollout at a time");
    expect(await request(k)).toBeNull();

    const done = await seed("ro-same");
    await leaderWrites(done, { ...baking(Date.now()), phase: "promoted", reason: "every step baked" }, "rev-b");
    const same = await llmha(["rollout", "start", ...fleet("ro-same"), "--to", "rev-b"]);
    expect(same.code).toBe(4);
    expect(same.err).toContain("the fleet serves rev-b already (the last rollout's revision): nothing to roll out");
    const reuse = await llmha(["rollout", "start", ...fleet("ro-same"), "--to", "rev-c", "--id", "r-42"]);
    expect(reuse.code).toBe(4);
    expect(reuse.err).toContain("the id r-42 was the last rollout's (promoted)");
    expect(await request(done)).toBeNull();
    // The same revision with a new engine image is a change.
    expect((await llmha(["rollout", "start", ...fleet("ro-same"), "--to", "rev-b", "--image", IMAGE])).code).toBe(0);

    const l3 = await seed("ro-l3", { tier: "L3" });
    const incident = await llmha(["rollout", "start", ...fleet("ro-l3"), "--to", "rev-b"]);
    expect(incident.code).toBe(4);
    expect(incident.err).toContain("the tier is L3 (az-b degraded)");
    expect(await request(l3)).toBeNull();
  }, 40_000);

  it("bad flags are usage errors (exit 2) naming the flag; --help is rollout's own", async () => {
    await seed("ro-flags");
    const cases: [string[], string][] = [
      [["rollout", "start", ...fleet("ro-flags")], "start needs --to REV"],
      [["rollout", "start", ...fleet("ro-flags"), "--to", "rev-b", "--image", "vllm/vllm-openai:latest"], "--image must name the image by digest"],
      [["rollout", "start", ...fleet("ro-flags"), "--to", "a,b"], "--to must be a revision of 1 to 200 characters without blanks or commas"],
      [["rollout", "start", ...fleet("ro-flags"), "--to", "rev-b", "--bake", "5m"], "--bake must be a whole number of seconds"],
      [["rollout", "pause", ...fleet("ro-flags"), "--to", "rev-b"], "--to only applies to start"],
      [["rollout", "pause", ...fleet("ro-flags"), "--wait"], "--wait does not apply to pause"],
      [["rollout", "abort", ...fleet("ro-flags"), "--wait-timeout", "5"], "--wait-timeout only applies with --wait"],
      [["rollout", "strat", ...fleet("ro-flags")], 'unknown subcommand "strat" (did you mean start?)'],
      [["rollout", "status", ...fleet("ro-flags"), "--wiat"], "did you mean --wait?"],
      [["rollout", "status", ...fleet("ro-flags"), "--json", "--wait"], "--json and --wait do not go together"],
    ];
    for (const [args, message] of cases) {
      const r = await llmha(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.err, args.join(" ")).toContain(message);
    }
    const help = await llmha(["rollout", "--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("Usage: llm-ha rollout start --to REV");
    expect((await llmha(["help", "rollout"])).out).toBe(help.out);
    expect((await llmha(["rollout", "start", "--help"])).out).toBe(help.out);
  }, 40_000);

  it("status shows the steps with their AZ and nodes, the one under way, the phase, each gate and the reason; --json carries it", async () => {
    const k = await seed("ro-show");
    const now = Date.now();
    await leaderWrites(k, baking(now));
    const r = await llmha(["rollout", "status", ...fleet("ro-show"), "-o", "wide"]);
    expect(r.code, r.err).toBe(0);
    const lines = r.out.split("\n");
    expect(lines[0]).toMatch(/^rollout r-42 {2}cluster ro-show {2}by operator {2}started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    expect(r.out).toMatch(/phase {4}baking, (?:4m 0\d|3m 5\d)s of 5m 00s bake left {2}since 6\ds ago/);
    expect(r.out).toContain(`change   rev-a → rev-b (image ${IMAGE})  bake 5m 00s per step`);
    expect(r.out).toContain("fleet    revision rev-a  agents accept rev-a, rev-b");
    expect(r.out).toContain("steps  step 2 of 3: az-a (AZ, 2 nodes) under way");
    expect(lines).toContain("    1/3   az-c  standby  baked        2/2 switched  c1, c2");
    expect(lines).toContain("  → 2/3   az-a  az       baking       2/2 switched  a1, a2");
    expect(lines).toContain("    3/3   az-b  az       pending      b1, b2");
    expect(lines).toContain("    latency       wait  p50 rev-b 41 ms vs rev-a 40 ms: too few probes yet (12 of 30)");
    expect(lines).toContain("    capacity      pass  az-a 16/16 GPUs, floor 12");
    expect(r.out).toContain("reason   every node of az-a serves rev-b; baking");

    const json = await llmha(["rollout", "status", ...fleet("ro-show"), "--json"]);
    const doc = JSON.parse(json.out) as { fleetRevision: string; rollout: { current: string; allow: string[]; last: RolloutState & { active: boolean; stepStates: string[] } } };
    expect(doc.fleetRevision).toBe("rev-a");
    expect(doc.rollout.allow).toEqual(["rev-a", "rev-b"]);
    expect(doc.rollout.last).toMatchObject({ id: "r-42", phase: "baking", step: 1, active: true, stepStates: ["baked", "baking", "pending"] });
    expect(doc.rollout.last.gates).toHaveLength(7);

    // No rollout ever: says so, exit 0.
    await seed("ro-none");
    const none = await llmha(["rollout", "status", ...fleet("ro-none")]);
    expect(none.code).toBe(0);
    expect(none.out).toContain("rollout  cluster ro-none: no rollout has run");
  }, 30_000);

  it("pause, resume, abort, promote name the rollout under way, and are refused where the leader would refuse them", async () => {
    const k = await seed("ro-ops");
    const now = Date.now();
    await leaderWrites(k, baking(now));
    const pause = await llmha(["rollout", "pause", ...fleet("ro-ops")]);
    expect(pause.code, pause.err).toBe(0);
    expect(pause.out).toContain("pause of rollout r-42 requested at");
    expect(pause.out).toContain("(now baking, step 2 of 3: az-a)");
    expect(await request(k)).toMatchObject({ op: "pause", id: "r-42", by: "operator" });
    // Not acted on yet: a second op waits, abort replaces it.
    expect((await llmha(["rollout", "promote", ...fleet("ro-ops")])).err).toContain("a pause request (r-42,");
    const abort = await llmha(["rollout", "abort", ...fleet("ro-ops"), "--id", "r-42"]);
    expect(abort.code, abort.err).toBe(0);
    expect(abort.out).toContain("it restores rev-a on every node that has rev-b, this step's first");
    expect(await request(k)).toMatchObject({ op: "abort", id: "r-42" });
    await c.del(k.rolloutRequest);

    expect((await llmha(["rollout", "abort", ...fleet("ro-ops"), "--id", "r-41"])).err).toContain("--id r-41 is not the rollout under way (r-42)");
    expect((await llmha(["rollout", "resume", ...fleet("ro-ops")])).err).toContain("rollout r-42 is not paused (it is baking)");
    const failing = baking(Date.now(), { gates: baking(now).gates.map((g) => (g.gate === "corruption" ? { ...g, verdict: "fail" as const, detail: "3 corrupted requests on a1" } : g)) });
    await leaderWrites(k, failing);
    const promote = await llmha(["rollout", "promote", ...fleet("ro-ops")]);
    expect(promote.code).toBe(4);
    expect(promote.err).toContain("gate corruption fails (3 corrupted requests on a1): the leader rolls back rather than promote");
    await leaderWrites(k, baking(Date.now(), { phase: "paused", pausedFrom: "baking", reason: "paused by operator" }));
    expect((await llmha(["rollout", "pause", ...fleet("ro-ops")])).err).toContain("rollout r-42 is paused already");
    expect((await llmha(["rollout", "promote", ...fleet("ro-ops")])).err).toContain("is paused (resume it first)");
    expect((await llmha(["rollout", "resume", ...fleet("ro-ops")])).code).toBe(0);
    expect(await request(k)).toMatchObject({ op: "resume", id: "r-42" });
    await c.del(k.rolloutRequest);

    await leaderWrites(k, rolledBack(Date.now()));
    for (const op of ["pause", "resume", "abort", "promote"]) {
      const r = await llmha(["rollout", op, ...fleet("ro-ops")]);
      expect(r.code, op).toBe(4);
      expect(r.err).toContain("no rollout is under way: the last one, r-42, ended rolled-back");
    }
    expect(await request(k)).toBeNull();
  }, 60_000);

  /** Plays the leader: takes the request, then writes each state in turn, a period (`gapMs`) apart. */
  async function leaderRuns(k: RedisKeys, states: (id: string) => RolloutState[], gapMs = 700): Promise<void> {
    let req: Record<string, unknown> | null = null;
    for (let i = 0; i < 100 && !req; i++) {
      req = await request(k);
      if (!req) await new Promise((r) => setTimeout(r, 100));
    }
    expect(req, "the command wrote no request").not.toBeNull();
    for (const s of states(String(req!.id))) {
      await leaderWrites(k, s);
      await new Promise((r) => setTimeout(r, gapMs));
    }
  }

  it("--wait follows the rollout to its end, a line per step or phase change: promoted 0, rolled back 5, aborted 6", async () => {
    const k = await seed("ro-wait");
    // An older rollout's state must not be taken for this one's. The leader here changes faster
    // than --wait polls (60 ms apart): each change still comes through, from the events.
    await leaderWrites(k, { ...rolledBack(Date.now() - 7_200_000), id: "old" });
    const run = (id: string): RolloutState[] => {
      const b = baking(Date.now(), { id, from: { revision: "rev-a" }, to: { revision: "rev-b" } });
      const at = (step: number, phase: RolloutState["phase"], reason: string): RolloutState => ({ ...b, step, phase, reason, since: Date.now() });
      return [at(0, "switching", "switching az-c"), at(0, "baking", "baking az-c"), at(1, "switching", "switching az-a"), at(1, "baking", "baking az-a"), at(2, "switching", "switching az-b"), at(2, "baking", "baking az-b"), at(2, "promoted", "every step baked")];
    };
    const [r] = await Promise.all([llmha(["rollout", "start", ...fleet("ro-wait"), "--to", "rev-b", "--id", "r-w1", "--wait", "--wait-timeout", "30"]), leaderRuns(k, run, 60)]);
    expect(r.code, r.err).toBe(0);
    const changes = r.out.split("\n").filter((l) => /^\d\d:\d\d:\d\dZ {2}/.test(l)).map((l) => l.slice(11));
    expect(changes).toEqual([
      "step 1 of 3: az-c (standby AZ, 2 nodes)  switching to rev-b",
      "step 1 of 3: az-c (standby AZ, 2 nodes)  baking (5m 00s; gates compare the new revision with the old)",
      "step 2 of 3: az-a (AZ, 2 nodes)  switching to rev-b",
      "step 2 of 3: az-a (AZ, 2 nodes)  baking (5m 00s; gates compare the new revision with the old)",
      "step 3 of 3: az-b (AZ, 2 nodes)  switching to rev-b",
      "step 3 of 3: az-b (AZ, 2 nodes)  baking (5m 00s; gates compare the new revision with the old)",
      "promoted: every step baked, the fleet serves rev-b",
    ]);

    // A failed gate: rolling back, then rolled back, exit 5 with the reason on stderr.
    const k2 = await seed("ro-wait-rb");
    const back = (id: string): RolloutState[] => {
      const rb = { ...rolledBack(Date.now()), id, since: Date.now() };
      return [{ ...baking(Date.now()), id, since: Date.now() }, { ...rb, phase: "rolling-back" }, rb];
    };
    const [r2] = await Promise.all([llmha(["rollout", "start", ...fleet("ro-wait-rb"), "--to", "rev-b", "--id", "r-w2", "--wait", "--wait-timeout", "30"]), leaderRuns(k2, back)]);
    expect(r2.code).toBe(5);
    expect(r2.out).toContain("step 2 of 3: az-a (AZ, 2 nodes)  rolling back to rev-a: latency failed in az-a");
    expect(r2.err).toContain("llm-ha rollout: rollout r-w2 rolled back: rev-a restored: latency failed in az-a: p50 rev-b 71 ms vs rev-a 40 ms");

    // abort --wait: the rollout under way, to `aborted` (exit 6).
    const k3 = await seed("ro-wait-ab");
    await leaderWrites(k3, baking(Date.now(), { id: "r-w3" }));
    const aborted = (): RolloutState[] => [{ ...rolledBack(Date.now()), id: "r-w3", phase: "aborted", since: Date.now(), reason: "aborted by operator" }];
    const [r3] = await Promise.all([llmha(["rollout", "abort", ...fleet("ro-wait-ab"), "--wait", "--wait-timeout", "30"]), leaderRuns(k3, aborted)]);
    expect(r3.code).toBe(6);
    expect(r3.err).toContain("rollout r-w3 aborted: rev-a restored: aborted by operator");
  }, 90_000);

  it("--wait with no leader acting gives up after --wait-timeout with exit 7", async () => {
    const k = await seed("ro-wait-none");
    const r = await llmha(["rollout", "start", ...fleet("ro-wait-none"), "--to", "rev-b", "--wait", "--wait-timeout=1"]);
    expect(r.code).toBe(7);
    expect(r.err).toMatch(/rollout rollout-\d{8}-\d{6} did not end within 1 s \(no leader acted on the request/);
    expect(await request(k)).not.toBeNull();
  }, 20_000);

  it("llm-ha status: the rollout section while one is active or ended within the hour, the rollout events, the JSON", async () => {
    const k = await seed("ro-status");
    await leaderWrites(k, baking(Date.now()));
    const r = await llmha(["status", ...fleet("ro-status"), "-o", "wide"]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/\nrollout {2}r-42 baking (?:4m 0\d|3m 5\d)s left {2}step 2\/3 az-a \(AZ, 2 nodes\) {2}rev-a → rev-b {2}since 6\ds ago\n/);
    expect(r.out).toContain("\n         gates  wait latency  6 of 7 pass\n");
    expect(r.out).toContain("\n         every node of az-a serves rev-b; baking\n");
    expect(r.out).toMatch(/\n {2,}\d+s ago {2}rollout r-42 step 2\/3 az-a baking \(rev-a → rev-b\): 2 nodes\n/);
    const json = JSON.parse((await llmha(["status", ...fleet("ro-status"), "--json"])).out) as { rollout: { shown: boolean; last: { phase: string } }; events: { type: string; tone: string }[] };
    expect(json.rollout).toMatchObject({ shown: true, current: "rev-a", last: { phase: "baking" } });
    expect(json.events[0]).toMatchObject({ type: "rollout", tone: "info" });

    // Rolled back a minute ago: shown, the failed gate and the reason in the section; the event in red.
    await leaderWrites(k, rolledBack(Date.now()));
    const after = await llmha(["status", ...fleet("ro-status"), "-o", "wide"]);
    expect(after.out).toMatch(/\nrollout {2}r-42 rolled-back {2}step 2\/3 az-a \(AZ, 2 nodes\) {2}rev-a → rev-b {2}since 2m ago\n/);
    expect(after.out).toContain("\n         latency failed in az-a: p50 rev-b 71 ms vs rev-a 40 ms: +78%, over 20% and 5 ms\n");
    expect(after.out).not.toContain("latency failed: p50"); // the reason says it: not twice
    expect(after.out).toContain("rollout r-42 rolled back: rev-a restored: latency failed in az-a");
    const doc = JSON.parse((await llmha(["status", ...fleet("ro-status"), "--json"])).out) as { events: { type: string; tone: string }[] };
    expect(doc.events[0]).toMatchObject({ type: "rollout", tone: "bad" });

    // Ended two hours ago: no section (the JSON still carries it, not shown).
    await leaderWrites(k, { ...rolledBack(Date.now()), since: Date.now() - 7_200_000 });
    const old = await llmha(["status", ...fleet("ro-status")]);
    expect(old.out).not.toMatch(/\nrollout {2}/);
    const oldDoc = JSON.parse((await llmha(["status", ...fleet("ro-status"), "--json"])).out) as { rollout: { shown: boolean } };
    expect(oldDoc.rollout.shown).toBe(false);

    // A pending start shows in the section until the leader acts on it.
    expect((await llmha(["rollout", "start", ...fleet("ro-status"), "--to", "rev-c", "--id", "r-43"])).code).toBe(0);
    const pend = await llmha(["status", ...fleet("ro-status"), "-o", "wide"]);
    expect(pend.out).toMatch(/\nrollout {2}requested \d+s ago: start r-43 to rev-c, pending: the leader acts on its next period\n/);
  }, 40_000);
});

describe("the rollout section's colours", () => {
  it("verdicts: what holds the step first, fail red; all passing green; a rollback's phase and reason red", () => {
    const now = 1_800_000_000_000;
    const s = baking(now, { gates: [...baking(now).gates.slice(0, 2), { gate: "latency", verdict: "fail", detail: "p50 +78%" }] });
    const text = toText(rolloutSection(rolloutView({ state: JSON.stringify(s), current: "rev-a", allow: "rev-a,rev-b", at: String(now) }, null, now), now), { color: true, width: 400 }).join("\n");
    expect(text).toContain("\x1b[31mfail\x1b[0m latency  2 of 3 pass");
    const all = toText(rolloutSection(rolloutView({ state: JSON.stringify(baking(now, { gates: baking(now).gates.filter((g) => g.verdict === "pass") })) }, null, now), now), { color: true, width: 400 }).join("\n");
    expect(all).toContain("\x1b[32mall 6 pass\x1b[0m");
    expect(text).toContain("\x1b[31mlatency failed: p50 +78%\x1b[0m");
    const back = toText(rolloutSection(rolloutView({ state: JSON.stringify(rolledBack(now)), current: "rev-a", allow: "rev-a" }, null, now), now), { color: true, width: 400 }).join("\n");
    expect(back).toContain("\x1b[31mrolled-back\x1b[0m");
    expect(back).toContain("\x1b[31mlatency failed in az-a");
    // A malformed state is said, not thrown.
    const bad = toText(rolloutSection(rolloutView({ state: "{nope", current: "rev-a" }, null, now), now)).join("\n");
    expect(bad).toMatch(/^rollout {2}cannot read the leader's state: the rollout state is not JSON/);
  });
});
