import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { createRedisClient } from "../../agent/src/fleet/redis/client";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { NodeRegistry } from "../../agent/src/fleet/redis/registry";
import { DEMO_AZS, demoDecision, startDemoFleet, type DemoFleet } from "../../lab/status/demo";
import { freePort, waitFor } from "../../agent/src/util/net";
import { freshCluster, testLogger } from "../redis/helpers";
import type { FleetView } from "../../agent/src/ops/status/types";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");

/** The environment without any LLMHA_ setting or NO_COLOR, so each test says what it means. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_") && k !== "NO_COLOR" && k !== "COLUMNS"));
  return { ...env, ...extra };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The real CLI as a user runs it (asynchronously: the fleet in this process keeps heartbeating). */
function cli(args: string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<Run> {
  const t0 = performance.now();
  const child = spawn(process.execPath, ["--import", "tsx", CLI, "status", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr, ms: performance.now() - t0 })));
}

/** `--watch`: lines as they come, and a way to stop it with Ctrl-C. */
function watch(args: string[]): { lines: string[]; stderr: () => string; interrupt: () => Promise<number | null> } {
  const child = spawn(process.execPath, ["--import", "tsx", CLI, "status", "--watch", ...args], { env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] });
  const lines: string[] = [];
  let buf = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => {
    buf += d.toString("utf8");
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  child.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
  const closed = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
  return {
    lines,
    stderr: () => err,
    async interrupt() {
      child.kill("SIGINT");
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      const code = await closed;
      clearTimeout(t);
      return code;
    },
  };
}

let redis: RedisServerHandle;
let fleet: DemoFleet;
let cluster: string;

beforeAll(async () => {
  redis = await startRedisServer();
  cluster = freshCluster("status");
  fleet = await startDemoFleet({ redisUrl: redis.url, cluster, log: testLogger(), intervalMs: 500 });
});
afterAll(async () => {
  await fleet?.stop();
  await redis?.stop();
});

describe("llm-ha status against a real redis-server and a real fleet", () => {
  it("shows nodes per AZ with status, weight and reasons, the AZ states, leader and token, tier, standby and the last events", async () => {
    const leader = fleet.leader();
    const r = await cli(["--cluster", cluster], cleanEnv({ LLMHA_REDIS_URL: redis.url }));
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const out = r.stdout;
    expect(out).not.toContain("\x1b["); // not a terminal: no colours
    for (const line of out.split("\n")) expect([...line].length).toBeLessThanOrEqual(100);
    expect(out).toContain(`cluster ${cluster}`);
    expect(out).toMatch(new RegExp(`leader +${leader.fleet.lease.holderId} +token ${leader.fleet.lease.token}\\b`));
    expect(out).toMatch(/tier +L2 +AZ degraded: us-east-1a/);
    expect(out).toMatch(/standby +us-east-1c +WAKE +capacity lost: us-east-1a=DEGRADED/);
    expect(out).toMatch(/us-east-1a +DEGRADED +16\/24 GPUs healthy +2\/3 nodes in/);
    expect(out).toMatch(/us-east-1b +OK +24\/32 GPUs healthy +3\/4 nodes in/);
    expect(out).toMatch(/us-east-1c \(standby\) +no nodes \(scaled to zero\)/);
    // node rows: status, weight, GPUs, reasons
    expect(out).toMatch(/\n +a1 +HEALTHY +100 +0\.31 +8\/8 +\d+s ago\n/);
    expect(out).toMatch(/\n +a2 +DEGRADED +50 +0\.87 +8\/8 +\d+s ago +soft PROBE_SLOW\n/);
    expect(out).toMatch(/\n +a3 +UNHEALTHY +0 +0\.20 +7\/8 +\d+s ago +hard GPU_MISSING\n/);
    expect(out).toMatch(/\n +b3 +HEALTHY +50 .* warmup\n/);
    expect(out).toMatch(/\n +b4 +EXPIRED +- +- +-\/8 +\d+s ago +no heartbeat/);
    // the last events, newest first, rendered by type
    const events = out.slice(out.indexOf("events"));
    expect(events).toMatch(/\d+s ago +action standby\.wake us-east-1c applied \(local\): gpu-c min 0→2/);
    expect(events).toMatch(/\d+s ago +standby us-east-1c wake: capacity lost: us-east-1a=DEGRADED\n/);
    expect(events).toMatch(/\d+s ago +tier L\d → L2: AZ degraded: us-east-1a\n/);
    expect(events).toMatch(/\d+s ago +AZ us-east-1a OK → DEGRADED \(\d+\/24 GPUs\)\n/);
    expect(events).toMatch(/\d+s ago +node a2 \(us-east-1a\) HEALTHY → DEGRADED soft PROBE_SLOW\n/);
    expect(events.indexOf("action standby.wake")).toBeLessThan(events.indexOf("HEALTHY → DEGRADED"));
    expect(events.split("\n").filter((l) => /^ +\d+s ago/.test(l))).toHaveLength(10);
  });

  it("fits $COLUMNS (long reasons end in …); -o wide prints every line whole", async () => {
    const narrow = await cli(["--cluster", cluster], cleanEnv({ LLMHA_REDIS_URL: redis.url, COLUMNS: "60" }));
    expect(narrow.code, narrow.stderr).toBe(0);
    const lines = narrow.stdout.trimEnd().split("\n");
    for (const line of lines) expect([...line].length, line).toBeLessThanOrEqual(60);
    expect(lines.some((l) => l.endsWith("…"))).toBe(true);
    const wide = await cli(["--cluster", cluster, "-o", "wide"], cleanEnv({ LLMHA_REDIS_URL: redis.url, COLUMNS: "60" }));
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout).not.toContain("…");
    expect(wide.stdout).toMatch(/standby +us-east-1c +WAKE +capacity lost: us-east-1a=DEGRADED/);
    expect(Math.max(...wide.stdout.split("\n").map((l) => [...l].length))).toBeGreaterThan(60);
  });

  it("--nodes attention lists the nodes to look at and counts the rest; --az shows one AZ; an AZ it does not have is exit 2", async () => {
    const env = cleanEnv({ LLMHA_REDIS_URL: redis.url });
    const r = await cli(["--cluster", cluster, "--nodes", "attention"], env);
    expect(r.code, r.stderr).toBe(0);
    for (const id of ["a2", "a3", "b3", "b4"]) expect(r.stdout).toMatch(new RegExp(`\n +${id} +`));
    for (const id of ["a1", "b1", "b2"]) expect(r.stdout).not.toMatch(new RegExp(`\n +${id} +`));
    expect(r.stdout).toMatch(/\n {2}1 more node HEALTHY and serving, not listed {2}\(--nodes all lists them\)\n/);
    expect(r.stdout).toMatch(/\n {2}2 more nodes HEALTHY and serving, not listed/);
    const one = await cli(["--cluster", cluster, "--az", "us-east-1b"], env);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/us-east-1b +OK/);
    expect(one.stdout).not.toMatch(/\nus-east-1a /);
    expect(one.stdout).not.toMatch(/\n +a1 +/);
    expect(one.stdout).toMatch(/\n +b1 +HEALTHY/);
    // The fleet's own lines stay above the one AZ.
    expect(one.stdout).toMatch(/tier +L2 +AZ degraded: us-east-1a/);
    const none = await cli(["--cluster", cluster, "--az", "us-east-1z"], env);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe("");
    expect(none.stderr).toBe(`llm-ha status: --az: no AZ us-east-1z in cluster ${cluster} (AZs: us-east-1a, us-east-1b, us-east-1c)\n`);
  });

  it("--json: one document with a version and the values a script needs", async () => {
    const leader = fleet.leader();
    const r = await cli(["--redis-url", redis.url, "--cluster", cluster, "--json", "--events", "30"]);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout) as FleetView;
    expect(v.version).toBe(1);
    expect(v.cluster).toBe(cluster);
    expect(v.leader).toMatchObject({ holder: leader.fleet.lease.holderId, token: leader.fleet.lease.token, highestToken: leader.fleet.lease.token });
    expect(v.leader.ttlMs).toBeGreaterThan(0);
    expect(v.tier).toMatchObject({ level: "L2", reason: "AZ degraded: us-east-1a", token: leader.fleet.lease.token, stale: false });
    expect(v.standby).toMatchObject({ az: DEMO_AZS.standby, wake: true });
    expect(v.azs.map((a) => [a.az, a.published?.state ?? null, a.standby])).toEqual([
      ["us-east-1a", "DEGRADED", false],
      ["us-east-1b", "OK", false],
      ["us-east-1c", null, true],
    ]);
    const node = (id: string) => v.azs.flatMap((a) => a.nodes).find((n) => n.id === id)!;
    expect(node("a2")).toMatchObject({ status: "DEGRADED", weight: 50, loadScore: 0.87, soft: ["PROBE_SLOW"], hard: [], alive: true, takesTraffic: true, model: "llama-3.1-70b" });
    expect(node("a3")).toMatchObject({ status: "UNHEALTHY", gpus: 7, gpusExpected: 8, hard: ["GPU_MISSING"], takesTraffic: false });
    expect(node("b4")).toMatchObject({ status: "EXPIRED", alive: false, loadScore: null });
    expect(node("b4").heartbeatAgeMs).toBeGreaterThan(node("b1").heartbeatAgeMs!);
    expect(new Set(v.events.map((e) => e.type))).toEqual(new Set(["node", "az", "tier", "standby", "suspect", "action", "model"]));
    expect(v.events.find((e) => e.type === "node" && e.fields.status === "EXPIRED")?.summary).toBe("node b4 (us-east-1b) expired: no heartbeat");
    const at = v.events.map((e) => e.at);
    expect(at).toEqual([...at].sort((a, b) => b - a)); // newest first
  });

  it("Redis unreachable: exit 1 within a few seconds, naming the URL without its password, no stack trace", async () => {
    const port = await freePort(); // nothing listens there
    const r = await cli(["--redis-url", `redis://:s3cret@127.0.0.1:${port}`]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(new RegExp(`^llm-ha status: cannot reach Redis at redis://:redacted@127\\.0\\.0\\.1:${port}: .*ECONNREFUSED.*\\n$`));
    expect(r.stderr).not.toContain("s3cret");
    expect(r.ms).toBeLessThan(8000); // tsx start-up included; the connection attempt itself gives up in ≤ 3 s
  });

  it("empty cluster: exit 3 naming the clusters that do exist", async () => {
    const r = await cli(["--redis-url", redis.url, "--cluster", "nothing-here"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(`llm-ha status: no llm-ha data for cluster nothing-here in Redis (clusters found: ${cluster}; pick one with --cluster)\n`);
  });

  it("bad flags: exit 2 with one line", async () => {
    const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
      [["--bogus"], cleanEnv({ LLMHA_REDIS_URL: redis.url }), /unknown flag --bogus/],
      [[], cleanEnv(), /no Redis to read: pass --redis-url or set LLMHA_REDIS_URL/],
      [["--redis-url", "http://x"], cleanEnv(), /--redis-url: must start with redis:\/\/ or rediss:\/\//],
      [["--redis-url", redis.url, "--events", "lots"], cleanEnv(), /--events must be a whole number from 0 to 1000/],
      [["--redis-url", redis.url, "--interval", "200"], cleanEnv(), /--interval only applies with --watch/],
      [["--redis-url", redis.url, "--cluster", "a:b"], cleanEnv(), /--cluster: cluster name must match/],
      [["--redis-url", redis.url, "--nodes", "some"], cleanEnv(), /--nodes must be all, attention, auto, got "some"/],
      [["--redis-url", redis.url, "--az", " "], cleanEnv(), /--az needs an AZ name/],
    ];
    const runs = await Promise.all(cases.map(([args, env]) => cli(args, env)));
    runs.forEach((r, i) => {
      expect(r.code, cases[i][0].join(" ")).toBe(2);
      expect(r.stderr).toMatch(cases[i][2]);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
    });
    const help = await cli(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--watch");
  });

  it("--watch with Redis unreachable shows a banner and keeps trying; Ctrl-C ends it with 0", async () => {
    const port = await freePort();
    const w = watch(["--redis-url", `redis://:s3cret@127.0.0.1:${port}`, "--interval", "200"]);
    await waitFor("two banners", () => w.lines.filter((l) => l.includes("Redis unreachable at")).length >= 2, { timeoutMs: 15_000 });
    expect(w.lines[0]).toMatch(/^ Redis unreachable at redis:\/\/:redacted@127\.0\.0\.1:\d+\/?: .*ECONNREFUSED/);
    expect(w.lines[1]).toBe(" retrying every 200 ms");
    expect(w.lines.join("\n")).not.toContain("s3cret");
    expect(await w.interrupt()).toBe(0);
  });

  it("--watch through a Redis outage: banner over the last good read, then live again", async () => {
    const other = await startRedisServer();
    const c = freshCluster("outage");
    const client = createRedisClient(other.url, { name: "test-outage", log: testLogger() });
    try {
      await client.whenReady(5000);
      // one real heartbeat that outlives the test (TTL = 3 periods)
      const reg = new NodeRegistry({ client, keys: new RedisKeys(c), settings: { intervalMs: 60_000 }, log: testLogger() });
      await reg.heartbeat({ nodeId: "x1", az: "az-x", decision: demoDecision("up", 0.1), gpus: 4, gpusExpected: 4, model: null });
      const w = watch(["--redis-url", other.url, "--cluster", c, "--interval", "200"]);
      try {
        const since = (from: number, pred: (l: string) => boolean) => () => w.lines.slice(from).some(pred);
        await waitFor("a live frame", since(0, (l) => /^ +x1 +HEALTHY/.test(l)), { timeoutMs: 15_000 });
        await other.pause(); // SIGSTOP: connected but silent, every read times out
        let mark = w.lines.length;
        await waitFor("the outage banner", since(mark, (l) => l.startsWith(" Redis unreachable at")), { timeoutMs: 10_000 });
        const at = w.lines.findIndex((l, i) => i >= mark && l.startsWith(" Redis unreachable at"));
        expect(w.lines[at + 1]).toMatch(/^ retrying every 200 ms; below: the last good read, from \d+s ago$/);
        expect(w.lines.slice(at + 2, at + 16).some((l) => /^ +x1 +HEALTHY/.test(l))).toBe(true);
        other.resume();
        mark = w.lines.length;
        await waitFor("live again", since(mark, (l) => l.startsWith("llm-ha status")), { timeoutMs: 10_000 });
      } finally {
        other.resume();
        expect(await w.interrupt()).toBe(0);
      }
      expect(w.stderr()).toBe("");
    } finally {
      await client.close();
      await other.stop();
    }
  });

  it("--watch --json: one line per refresh, and a change between two refreshes shows", async () => {
    const w = watch(["--redis-url", redis.url, "--cluster", cluster, "--json", "--interval", "200"]);
    try {
      const docs = (): FleetView[] => w.lines.map((l) => JSON.parse(l) as FleetView);
      const a1 = (v: FleetView) => v.azs.flatMap((a) => a.nodes).find((n) => n.id === "a1")!;
      await waitFor("a first refresh", () => docs().length >= 1, { timeoutMs: 15_000 });
      expect(a1(docs()[0]).status).toBe("HEALTHY");
      fleet.set("a1", "down");
      const changed = await waitFor("a1 UNREACHABLE in a later refresh", () => docs().find((v) => a1(v).status === "UNREACHABLE"), { timeoutMs: 10_000 });
      expect(a1(changed)).toMatchObject({ weight: 0, hard: ["INFERENCE_DOWN"], takesTraffic: false });
      expect(docs().length).toBeGreaterThanOrEqual(2);
      expect(docs().every((v) => v.version === 1 && v.cluster === cluster)).toBe(true);
    } finally {
      fleet.set("a1", "up");
      expect(await w.interrupt()).toBe(0);
    }
    expect(w.stderr()).toBe("");
  });
});
