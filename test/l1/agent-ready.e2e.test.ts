/**
 * The agent-check reply on a real HAProxy: after a `drain`, HAProxy keeps the server in
 * DRAIN until an `up` reply carries `ready`. An HAProxy that missed the moment the node came
 * back (here: it could not reach the agent for longer than the old 10 s `ready` window) must
 * still put the node back in rotation.
 */
import type { Server } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import type { HaproxyHandle } from "../../lab/engines/haproxy";
import { AgentCheckResponder, startAgentCheckServer } from "../../agent/src/node/reporters/agent-check";
import type { Decision } from "../../agent/src/types";
import { freePort, sleep } from "../../agent/src/util/net";
import { answer, fakeServer, startL1, staticServer, waitStatus, type FakeServer } from "./fixtures";

const HEALTHY: Decision = {
  status: "HEALTHY",
  phase: "serving",
  weight: 100,
  reasons: [],
  pending: [],
  suppressed: [],
  since: 0,
  checkedAt: 0,
  loadScore: 0,
};

let hp: HaproxyHandle | undefined;
let node: FakeServer | undefined;
let agent: Server | undefined;
afterAll(async () => {
  await hp?.stop();
  await node?.close();
  agent?.close();
});

describe("agent-check replies on a real HAProxy", () => {
  it("a drained node comes back READY when its agent answers after a long silence", async () => {
    node = await fakeServer("gpu-1", answer(200));
    const responder = new AgentCheckResponder();
    let draining = true;
    const replies: string[] = [];
    const port = await freePort();
    const serve = () => startAgentCheckServer("127.0.0.1", port, () => responder.reply(HEALTHY, draining), (l) => replies.push(l));
    agent = await serve();
    const l1 = await startL1({ local: [staticServer(node, port)] });
    hp = l1.hp;
    await waitStatus(hp, ["gpu-1"], /^DRAIN/);

    // HAProxy loses the agent (a partition, the agent's port blocked) while the node recovers.
    await new Promise<void>((resolve) => agent!.close(() => resolve()));
    draining = false;
    await sleep(10_500);
    replies.length = 0;
    agent = await serve();
    await waitStatus(hp, ["gpu-1"], /^UP$/, 5000);
    expect(replies.every((r) => r === "up ready 100%")).toBe(true);
    expect((await hp.stats()).find((r) => r.server === "gpu-1")?.weight).toBe(100);
  });
});
