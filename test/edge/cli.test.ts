/**
 * `llm-ha keys` and `llm-ha edge-sync --once` as an operator and an init container run them,
 * against a real redis-server: a key is printed once and stored only as its hash; list never
 * shows it; revoke and rotate by id; bad flags exit 2; a sync with no Redis writes an empty map.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { main } from "../../agent/src/cli";
import { runInProcess, type Ran } from "../support/in-process";
import { startRedisServer, type RedisServerHandle } from "../../lab/engines/redis-server";
import { hashKey } from "../../agent/src/edge/keys/keys";
import { freePort } from "../../agent/src/util/net";

/** `llm-ha ARGS` as the image runs it (its entry function), with none of the caller's `LLMHA_*` settings. */
const runLlmHa = (args: string[]): Promise<Ran> => runInProcess(main, args, { cleanLlmha: true });

describe("llm-ha keys and edge-sync --once", () => {
  let redis: RedisServerHandle;
  let dir: string;
  const cluster = `cli-${process.pid}`;
  const fleet = (): string[] => ["--redis-url", redis.url, "--cluster", cluster];

  beforeAll(async () => {
    redis = await startRedisServer();
    dir = mkdtempSync(join(tmpdir(), "llmha-keys-cli-"));
  });
  afterAll(async () => {
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("prints a new key once, stores its hash only, lists, rotates and revokes by id", async () => {
    const add = await runLlmHa(["keys", "add", "--tenant", "team-a", "--rps", "7", "--concurrency", "3", "--note", "ci", ...fleet()]);
    expect(add.code).toBe(0);
    const key = add.stdout.trim();
    expect(key).toMatch(/^sk-llmha-[a-z0-9]{10}-[A-Za-z0-9_-]{43}$/);
    expect(add.stderr).toContain("shown once");
    const client = new Redis(redis.url);
    const stored = await client.hgetall(`llmha:${cluster}:edge:keys`);
    client.disconnect();
    expect(Object.keys(stored)).toEqual([hashKey(key)]);
    expect(JSON.stringify(stored)).not.toContain(key.slice(20));
    const list = await runLlmHa(["keys", "list", "--json", ...fleet()]);
    const doc = JSON.parse(list.stdout) as { version: number; keys: { id: string; tenant: string; rps: number; concurrency: number }[] };
    expect(doc.version).toBe(1);
    expect(doc.keys).toMatchObject([{ tenant: "team-a", rps: 7, concurrency: 3 }]);
    expect(list.stdout).not.toContain(key.slice(20));
    const id = doc.keys[0].id;
    const rot = await runLlmHa(["keys", "rotate", id, "--overlap", "2h", ...fleet()]);
    expect(rot.code).toBe(0);
    expect(rot.stdout.trim()).not.toBe(key);
    expect(rot.stderr).toContain(`llm-ha keys revoke ${id}`);
    expect(rot.stderr).toMatch(/expires in (2h|120m)/);
    // The rotated-out key shows when it expires; the new one never does.
    const rotated = await runLlmHa(["keys", "list", ...fleet()]);
    expect(rotated.stdout).toMatch(new RegExp(`^${id} .* in (2h|120m) `, "m"));
    expect(rotated.stdout).toMatch(/EXPIRES/);
    expect((await runLlmHa(["keys", "revoke", id, ...fleet()])).code).toBe(0);
    expect((await runLlmHa(["keys", "revoke", id, ...fleet()])).code).toBe(3);
    const table = await runLlmHa(["keys", "list", ...fleet()]);
    expect(table.stdout).toMatch(/team-a\s+7\s+3/);
    expect(table.stdout).not.toMatch(new RegExp(`^${id} `, "m"));
    expect(table.stdout).toContain(`rotated from ${id}`);
  }, 240_000); // seven CLI starts (tsx loading the sources each time): over 60 s on a loaded runner

  it("refuses bad flags with exit 2 and a message naming the flag", async () => {
    const cases: [string[], RegExp][] = [
      [["keys", "add", ...fleet()], /add needs --tenant/],
      [["keys", "add", "--tenant", "Bad Tenant", ...fleet()], /tenant "Bad Tenant"/],
      [["keys", "add", "--tenant", "t", "--rps", "0", ...fleet()], /--rps must be a whole number/],
      [["keys", "revoke", ...fleet()], /revoke needs the key id/],
      [["keys", "frobnicate", ...fleet()], /unknown command "frobnicate"/],
      [["keys", "list", "--bogus", ...fleet()], /bogus/],
      [["keys", "rotate", "abcd1234", "--overlap", "5 weeks", ...fleet()], /--overlap must be a duration/],
    ];
    for (const [args, msg] of cases) {
      const r = await runLlmHa(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(msg);
    }
  });

  it("edge-sync --once writes the map from Redis, or an empty one when Redis does not answer", async () => {
    await runLlmHa(["keys", "add", "--tenant", "team-b", ...fleet()]);
    const map = join(dir, "keys.map");
    expect((await runLlmHa(["edge-sync", "--once", "--map", map, ...fleet()])).code).toBe(0);
    expect(readFileSync(map, "utf8")).toMatch(/^[0-9a-f]{64} [a-z0-9]{10}:team-b:20:16$/m);
    const empty = join(dir, "empty.map");
    const r = await runLlmHa(["edge-sync", "--once", "--map", empty, "--redis-url", `redis://127.0.0.1:${await freePort()}`, "--cluster", cluster]);
    expect(r.code).toBe(0);
    expect(readFileSync(empty, "utf8")).not.toMatch(/^[0-9a-f]{64} /m);
  }, 30_000);
});
