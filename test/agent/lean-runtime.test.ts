import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { checksOnly, LEAN_V8_FLAGS } from "../../agent/src/node/lean-runtime";

describe("the lean runtime of an agent that only checks its node", () => {
  it("is for `node`, and for `all` without Redis; never for a process that can lead", () => {
    expect(checksOnly({ role: "node", redisUrl: "redis://r:6379" })).toBe(true);
    expect(checksOnly({ role: "all", redisUrl: null })).toBe(true);
    expect(checksOnly({ role: "all", redisUrl: "redis://r:6379" })).toBe(false);
    expect(checksOnly({ role: "controller", redisUrl: "redis://r:6379" })).toBe(false);
  });

  it("sets flags this Node knows: a flag V8 does not know would fail the agent's start", () => {
    // setFlagsFromString reports an unknown flag on stderr; each of ours must be taken silently.
    const script = `const v8 = require("node:v8"); for (const f of ${JSON.stringify(LEAN_V8_FLAGS)}) v8.setFlagsFromString(f);`;
    const r = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", cwd: join(__dirname, "..", "..") });
    expect(r.status).toBe(0);
    expect(r.stderr).toBe("");
  });
});
