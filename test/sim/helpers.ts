/** What the fake inference suites share: the model id, servers and child processes stopped after each test, a raw-socket outcome. */
import type { ChildProcess } from "node:child_process";
import { get as httpGet } from "node:http";
import { afterEach } from "vitest";
import { startFakeInference, type FakeInference, type FakeInferenceOptions } from "../../lab/sim/fake-inference";

export const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

/**
 * Registers an `afterEach` that closes every fake server started through `fake` and kills
 * every child passed to `track`; `defaults` are merged under each call's options.
 */
export function fakeServers(defaults: FakeInferenceOptions = {}): {
  fake: (opts?: FakeInferenceOptions) => Promise<FakeInference>;
  track: (child: ChildProcess) => void;
} {
  const started: FakeInference[] = [];
  const children: ChildProcess[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((f) => f.close()));
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null && c.pid) process.kill(c.pid, "SIGKILL");
  });
  return {
    fake: async (opts = {}) => {
      const f = await startFakeInference({ model: MODEL, ...defaults, ...opts });
      started.push(f);
      return f;
    },
    track: (child) => void children.push(child),
  };
}

/** "answered" when the server sent a response head, else the socket error's code (ECONNREFUSED, ECONNRESET…). */
export function failure(url: string, path: string): Promise<string> {
  return new Promise((done) => {
    const req = httpGet(url + path, { agent: false, timeout: 5000 }, (res) => {
      res.resume();
      done("answered");
    });
    req.on("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.name));
  });
}
