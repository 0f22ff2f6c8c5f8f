/**
 * `npm run image:check` stopped early leaves nothing behind: a reader that goes away (`| head`)
 * or a SIGTERM stops the stage builds it started and removes their temp folders, including one
 * it was making at that moment.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { testTempDir } from "../support/temp-dir";

const ROOT = join(__dirname, "..", "..");

/** Runs the check with its temp folders under `tmp`; `stop` is called at the first line `at` matches. */
function runUntil(tmp: string, at: RegExp, stop: (child: ChildProcess) => void): Promise<number | null> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/image-check.ts"], { cwd: ROOT, env: { ...process.env, TMPDIR: tmp }, stdio: ["ignore", "pipe", "ignore"] });
  let buf = "";
  let stopped = false;
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    if (!stopped && at.test(buf)) {
      stopped = true;
      stop(child);
    }
  });
  return new Promise((r) => child.once("exit", (code) => r(code)));
}

/** What is left under `tmp`: its temp folders, and processes working in them. */
function leftUnder(tmp: string): { folders: string[]; processes: string[] } {
  const processes = readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readlinkSync(`/proc/${p}/cwd`).startsWith(tmp);
      } catch {
        return false;
      }
    });
  return { folders: readdirSync(tmp).filter((f) => f.startsWith("llm-ha-image-")), processes };
}

describe("image:check stopped early", () => {
  it("a reader that goes away at the first line: exit 141, nothing left", async () => {
    const tmp = testTempDir("llmha-image-pipe-");
    expect(await runUntil(tmp, /\n/, (c) => c.stdout?.destroy())).toBe(141);
    expect(leftUnder(tmp)).toEqual({ folders: [], processes: [] });
  }, 60_000);

  it("SIGTERM while the stages' npm ci run: exit 143, nothing left", async () => {
    const tmp = testTempDir("llmha-image-term-");
    const code = await runUntil(tmp, /build: line \d+: RUN npm ci/, (c) => setTimeout(() => c.kill("SIGTERM"), 1_000));
    expect(code).toBe(143);
    expect(leftUnder(tmp)).toEqual({ folders: [], processes: [] });
  }, 60_000);
});
