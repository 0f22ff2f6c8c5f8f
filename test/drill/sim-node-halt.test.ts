/**
 * A simulated node halted by the local cloud (a standby released, a reboot) starts no agent until
 * its next boot: an agent restart racing the halt (the drill's settings switch restarts every
 * running agent one at a time) once left an agent running on a stopped node, with the old
 * settings, which went on to lead the fleet and ran a rollout with a 300 s bake.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SimNode } from "../../lab/sim/sim-node";

const dir = mkdtempSync(join(tmpdir(), "llmha-simnode-halt-"));
let n: SimNode | null = null;
afterAll(async () => {
  await n?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const alive = (pid: number | null): boolean => {
  if (pid === null) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("SimNode halt", () => {
  it("an agent start racing a halt, or after it, starts nothing until the next boot", async () => {
    n = await SimNode.start({ id: "gpu-h1", az: "az-a", dir });
    const first = n.agentPid;
    expect(alive(first)).toBe(true);
    // The settings switch's restart: stop the agent, then start it, while the cloud halts the node.
    await n.stopAgent();
    const halt = n.halt(2000);
    await n.startAgent();
    await halt;
    expect(n.halted).toBe(true);
    expect(n.agentPid).toBeNull();
    expect(n.running).toBe(false);
    await n.startAgent();
    expect(n.agentPid).toBeNull();
    // Its next boot starts it again.
    await n.boot();
    expect(n.halted).toBe(false);
    expect(alive(n.agentPid)).toBe(true);
  }, 90_000);
});
