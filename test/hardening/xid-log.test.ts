/** A missing LLMHA_XID_LOG is warned about once, not every period, and its return is logged. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimNode } from "../../lab/sim/sim-node";
import { sleep, waitFor } from "../../agent/src/util/net";

const dir = mkdtempSync(join(tmpdir(), "llmha-xidlog-"));
const missing = join(dir, "not-yet.kmsg");
let node: SimNode;

beforeAll(async () => {
  node = await SimNode.start({ id: "gpu-xl", az: "az-a", dir, env: { LLMHA_INTERVAL_MS: "200", LLMHA_XID_LOG: missing } });
});
afterAll(async () => {
  await node?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("LLMHA_XID_LOG missing", () => {
  it("warns once, then once more when it comes back", async () => {
    await sleep(2500); // over ten periods
    const log = () => readFileSync(join(dir, "gpu-xl.log"), "utf8");
    expect(log().split("cannot read the kernel log").length - 1).toBe(1);
    writeFileSync(missing, "");
    await waitFor("the log readable again", async () => log().includes("kernel log readable again"), { timeoutMs: 5000 });
    expect(log().split("cannot read the kernel log").length - 1).toBe(1);
  });
});
