/**
 * `llm-ha demo` as a user runs it: it starts its own redis-server and demo fleet, prints the
 * `llm-ha status` line to paste, and that line (run as its own process) shows the live fleet;
 * faults come and go; Ctrl-C (SIGINT) stops the fleet and the redis-server, leaving nothing
 * running.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pidAlive, runLlmHa } from "../../lab/cli-process";

const LAB_CLI = join(__dirname, "..", "..", "lab", "cli.ts");

describe("llm-ha demo", () => {
  const child = spawn(process.execPath, ["--import", "tsx", LAB_CLI, "demo", "--fault-every", "1"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
  child.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
  const closed = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
  afterAll(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });

  it("starts, prints a status line that reads the live fleet, and Ctrl-C leaves nothing running", async () => {
    const deadline = Date.now() + 60_000;
    while (!/--watch\n[\s\S]*(healed|degraded|down)/.test(out.slice(out.indexOf("In another terminal")))) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`demo did not come up: ${out}\n${err}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const pid = Number(/redis-server pid (\d+)/.exec(out)?.[1]);
    expect(pidAlive(pid)).toBe(true);
    const line = /^ {2}bin\/llm-ha (status --redis-url \S+ --cluster \S+) --watch$/m.exec(out);
    expect(line, out).not.toBeNull();
    // The pasted line, without --watch so that it reads once.
    const status = await runLlmHa(line![1].split(" "));
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain("cluster demo");
    expect(status.stdout).toMatch(/us-east-1a +(OK|DEGRADED)/);
    expect(status.stdout).toMatch(/\n +b1 +(HEALTHY|DEGRADED)/);

    child.kill("SIGINT");
    expect(await closed).toBe(0);
    expect(out).toContain("stopped: nothing of the demo is left running");
    expect(pidAlive(pid)).toBe(false);
    expect(err).toBe("");
  }, 120_000);
});
