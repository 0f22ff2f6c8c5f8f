/**
 * One CLI: every command behind `bin/llm-ha` has its own help (`llm-ha CMD --help`
 * and `llm-ha help CMD`, on stdout, exit 0), `--version` prints the package's version, a
 * mistyped command or flag gets "did you mean", every usage error goes to stderr with exit 2,
 * the fleet flags have one name everywhere (`--redis-ca-file`; `--ca-file` still works), and
 * `--json` / `-o json` always print a JSON document with a `version`, also for an empty
 * cluster or an unreachable Redis. Each run is the command as a user runs it (argv, exit code,
 * stdout, stderr): the checkout's commands in this process (test/support/in-process.ts), the
 * scripts bin/llm-ha runs by path (policy, observability, bench) as bin/llm-ha processes.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../agent/src/util/net";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { CHECKOUT_COMMANDS, main } from "../../lab/cli";
import { runInProcess, type Ran } from "../support/in-process";

const ROOT = join(__dirname, "..", "..");
const BIN = join(ROOT, "bin", "llm-ha");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

/** The commands bin/llm-ha runs as scripts of their own, by path: only a process reaches them. */
const BIN_SCRIPTS = new Set(["policy", "observability", "bench"]);

/** `bin/llm-ha ARGS` as a process, with none of the caller's `LLMHA_*` settings. */
function viaBin(args: string[]): Promise<Ran> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LLMHA_") && k !== "NO_COLOR"));
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, timeout: 180_000, cwd: ROOT }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

/** `llm-ha ARGS` with none of the caller's `LLMHA_*` settings. */
function llmha(...args: string[]): Promise<Ran> {
  const name = args[0] === "help" ? args[1] : args[0];
  if (name !== undefined && BIN_SCRIPTS.has(name)) return viaBin(args);
  return runInProcess(main, args, { cleanLlmha: true, cwd: ROOT });
}

/** Runs `f` over `items`, `n` at a time (the bin scripts are processes: the machine is small). */
async function pool<T, R>(items: readonly T[], n: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]);
    }
  }));
  return out;
}

describe("llm-ha help", () => {
  it("every command has its own help: `llm-ha help CMD` and `llm-ha CMD --help` print the same text, on stdout, exit 0", async () => {
    const names = CHECKOUT_COMMANDS.map((c) => c.name);
    // `help CMD` for every command; `CMD --help` beside it for one command of each entry kind (the
    // image's, the checkout's, a script of bin/llm-ha's own): each is a process start, and the
    // launcher maps one onto the other for all of them.
    const sampled = new Set(["status", "practice", "drill", "policy", "fallback"]);
    const runs = await pool(names, 3, async (name) => ({ name, help: await llmha("help", name), flag: sampled.has(name) ? await llmha(name, "--help") : null }));
    for (const { name, help, flag } of runs) {
      expect(help.code, `llm-ha help ${name}: ${help.stderr}`).toBe(0);
      if (flag) {
        expect(flag.code, `llm-ha ${name} --help: ${flag.stderr}`).toBe(0);
        expect(help.stdout, name).toBe(flag.stdout);
      }
      expect(help.stdout, name).toMatch(new RegExp(`llm-ha ${name}|npm run ${name}`));
      expect(help.stdout.length, name).toBeGreaterThan(80);
    }
    // Not the status help for practice (as it was), nor the overview for `help status`.
    const practice = runs.find((r) => r.name === "practice")!;
    expect(practice.help.stdout).toContain("Usage: llm-ha practice");
    expect(runs.find((r) => r.name === "status")!.help.stdout).toContain("Usage: llm-ha status");
  }, 600_000);

  it("the overview lists every command; `--version` prints the package's version", async () => {
    const overview = await llmha("help");
    expect(overview.code).toBe(0);
    for (const c of CHECKOUT_COMMANDS) expect(overview.stdout).toContain(`llm-ha ${c.name} `);
    for (const flag of ["--version", "-V"]) {
      const v = await llmha(flag);
      expect(v.code).toBe(0);
      expect(v.stdout).toBe(`llm-ha ${VERSION}\n`);
    }
  }, 60_000);
});

describe("usage errors: stderr, exit 2, did you mean", () => {
  it("a mistyped command or flag names the closest one; nothing on stdout", async () => {
    const cases: [string[], string][] = [
      [["stauts"], 'llm-ha: unknown command "stauts" (did you mean status?)'],
      [["help", "practise"], 'unknown command "practise" (did you mean practice?)'],
      [["status", "--redis-url", "redis://127.0.0.1:1", "--jsno"], "unknown flag --jsno (did you mean --json?)"],
      [["status", "--redis-url", "redis://127.0.0.1:1", "--ca-fil", "x"], "unknown flag --ca-fil (did you mean --redis-ca-file?)"],
      [["agent", "--intervl-ms", "500"], "unknown flag --intervl-ms (did you mean --interval-ms?)"],
      [["keys", "list", "--clustr", "x"], "unknown flag --clustr (did you mean --cluster?)"],
      [["redis-acl", "--acess-strings"], "unknown flag --acess-strings (did you mean --access-strings?)"],
      [["fallback", "--prot", "1"], "(did you mean --port?)"],
      [["cache", "lst"], 'unknown subcommand "lst" (did you mean list?)'],
      [["canary", "shwo"], 'unknown subcommand "shwo" (did you mean show?)'],
      [["cost", "--stak", "dev"], 'unknown flag "--stak" (did you mean --stack?)'],
      [["preflight", "--stak", "dev"], 'unknown flag "--stak" (did you mean --stack?)'],
      [["policy", "--stak", "dev"], "unknown flag --stak (did you mean --stack?)"],
      [["status", "-o", "yaml", "--redis-url", "redis://127.0.0.1:1"], "-o/--output must be text, wide or json"],
      [["cache"], "which one: import, list or rm?"],
      [["observability", "--clustr", "x"], "unknown flag --clustr (did you mean --cluster?)"],
      [["bench", "--quik"], "unknown flag --quik (did you mean --quick?)"],
    ];
    const runs = await pool(cases, 3, async ([args]) => llmha(...args));
    cases.forEach(([args, want], i) => {
      const r = runs[i];
      expect(r.code, `llm-ha ${args.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr, args.join(" ")).toContain(want);
      expect(r.stdout, args.join(" ")).toBe("");
    });
  }, 600_000);
});

describe("fleet flags and JSON", () => {
  let redis: RedisServerHandle;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("--redis-ca-file everywhere (as the agent names it); the old --ca-file still works but is not advertised", async () => {
    const [now, old, help] = await Promise.all([
      llmha("status", "--redis-url", "rediss://127.0.0.1:1", "--redis-ca-file", "/nonexistent/ca.pem"),
      llmha("status", "--redis-url", "rediss://127.0.0.1:1", "--ca-file=/nonexistent/ca.pem"),
      llmha("status", "--help"),
    ]);
    for (const r of [now, old]) {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("--redis-ca-file cannot be read");
    }
    expect(help.stdout).toContain("--redis-ca-file PATH");
    expect(help.stdout).not.toContain("--ca-file");
  }, 60_000);

  it("status --json and -o json on an empty cluster print a document with its version (exit 3), never nothing", async () => {
    for (const flag of [["--json"], ["-o", "json"]]) {
      const r = await llmha("status", "--redis-url", redis.url, "--cluster", "nobody-here", ...flag);
      expect(r.code).toBe(3);
      const doc = JSON.parse(r.stdout) as { version: number; cluster: string; empty: boolean };
      expect(doc).toMatchObject({ cluster: "nobody-here", empty: true });
      expect(doc.version).toBeGreaterThan(0);
      expect(r.stderr).toContain("no llm-ha data for cluster nobody-here");
    }
  }, 60_000);

  it("status -o json with Redis unreachable prints a document with the error (exit 1)", async () => {
    const r = await llmha("status", "--redis-url", `redis://127.0.0.1:${await freePort()}`, "-o", "json");
    expect(r.code).toBe(1);
    const doc = JSON.parse(r.stdout) as { version: number; error: string };
    expect(doc.version).toBeGreaterThan(0);
    expect(doc.error).toContain("cannot reach Redis");
  }, 60_000);

  it("-o json is --json on the other commands that have JSON (keys list, cache list, cost)", async () => {
    const [keys, cache, cost] = await Promise.all([
      llmha("keys", "list", "--redis-url", redis.url, "--cluster", "json-keys", "-o", "json"),
      llmha("cache", "list", "--redis-url", redis.url, "--cluster", "json-cache", "-o", "json"),
      llmha("cost", "--stack", "dev", "--month", "2026-02", "-o", "json"),
    ]);
    expect(keys.code, keys.stderr).toBe(0);
    expect(JSON.parse(keys.stdout)).toMatchObject({ version: 1, cluster: "json-keys", keys: [] });
    expect(cache.code, cache.stderr).toBe(0);
    expect(JSON.parse(cache.stdout)).toEqual({ version: 1, cluster: "json-cache", entries: [] });
    expect(cost.code, cost.stderr).toBe(0);
    expect(JSON.parse(cost.stdout)).toHaveProperty("total");
  }, 120_000);
});
