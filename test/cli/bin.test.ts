/**
 * `bin/llm-ha` is what README tells users to run: it must dispatch every subcommand and
 * pass the exit code through, from a checkout (tsx) as from a build (dist/).
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const BIN = join(__dirname, "..", "..", "bin", "llm-ha");
const run = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 60_000, env: { ...process.env, LLMHA_REDIS_URL: "" } });

describe("bin/llm-ha", () => {
  it("runs a subcommand and passes its output and exit code through", () => {
    const help = run("help");
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("llm-ha cost --stack ENV");
    const cost = run("cost", "--stack", "dev", "--month", "2026-02", "--json");
    expect(cost.status, cost.stderr).toBe(0);
    expect(JSON.parse(cost.stdout)).toHaveProperty("total");
    const status = run("status");
    expect(status.status).toBe(2);
    expect(status.stderr).toContain("no Redis to read");
    expect(run("no-such-command").status).toBe(2);
  });
});
