/**
 * On a real agent process: 10,000 agent-check clients that send bytes (as
 * HAProxy's `agent-send` does) leave the agent's descriptor count flat, and every reply
 * stays right. Before the fix each such client leaked one socket until EMFILE.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimNode } from "../../lab/sim/sim-node";
import { waitFor } from "../../agent/src/util/net";

const CLIENTS = 10_000;
const dir = mkdtempSync(join(tmpdir(), "llmha-fds-"));
let node: SimNode;

beforeAll(async () => {
  node = await SimNode.start({ id: "gpu-fd", az: "az-a", dir, env: { LLMHA_INTERVAL_MS: "250", LLMHA_WARMUP_STEP_MS: "200" } });
  await waitFor("the agent to answer up", async () => (await node.agentCheck()).startsWith("up"), { timeoutMs: 30_000 });
});
afterAll(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const fds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

function agentSend(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    let got = "";
    s.on("connect", () => s.write("x\n"));
    s.on("data", (b) => {
      got += b.toString();
      if (got.endsWith("\n")) s.destroy(); // read the line, then close, as HAProxy does
    });
    s.on("close", () => resolve(got));
    s.on("error", reject);
  });
}

describe("agent descriptors under agent-check clients that send data", () => {
  it(`stay flat over ${CLIENTS} clients`, async () => {
    const pid = node.agentPid!;
    const before = fds(pid);
    let bad = 0;
    for (let i = 0; i < CLIENTS; i += 50) {
      const replies = await Promise.all(Array.from({ length: 50 }, () => agentSend(node.agentCheckPort)));
      bad += replies.filter((r) => !/^(up|drain|down)/.test(r)).length;
    }
    let after = fds(pid);
    await waitFor("the agent's sockets to close", async () => (after = fds(pid)) <= before + 10, { timeoutMs: 5000 }).catch(() => undefined);
    process.stderr.write(`[descriptors] agent fds before ${before}, after ${CLIENTS} agent-check clients ${after}\n`);
    expect(bad).toBe(0);
    expect(after).toBeLessThanOrEqual(before + 10);
    expect((await node.agentGet("/livez")).status).toBe(200);
  }, 120_000);
});
