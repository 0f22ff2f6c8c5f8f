/**
 * The drill's own network: a cut and a heal between two loopback addresses with
 * iptables inside a namespace of its own, on a real redis-server, a delay and a lost
 * connection through the LossyLink, and — while the link is cut in there — the same
 * addresses on the host's loopback still talking (nothing leaves the namespace). Needs root
 * (`unshare -n`, iptables); elsewhere it is skipped, as the drill skips those scenarios.
 */
import { spawn } from "node:child_process";
import { createServer, connect } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { LinkCuts, NETNS_ENV, NetnsError, dropRules, netnsCommand, netnsMark, netnsSupport } from "../../lab/engines/netns";

const CHILD = join(__dirname, "fixtures", "netns-cut-child.ts");
const support = netnsSupport();

/** From the host's namespace: 127.3.0.2 connects to a listener on 127.3.0.1 (the addresses cut inside). */
async function hostLinkWorks(): Promise<boolean> {
  const server = createServer((s) => s.end("ok"));
  await new Promise<void>((r) => server.listen(0, "127.3.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  try {
    return await new Promise<boolean>((resolve) => {
      const c = connect({ host: "127.3.0.1", port, localAddress: "127.3.0.2" });
      c.setTimeout(1000, () => (c.destroy(), resolve(false)));
      c.on("data", (d) => (c.destroy(), resolve(d.toString() === "ok")));
      c.on("error", () => resolve(false));
    });
  } finally {
    server.close();
  }
}

describe("drill network namespace", () => {
  it("refuses rules outside a namespace of its own and anything but loopback addresses", () => {
    const saved = process.env[NETNS_ENV];
    process.env[NETNS_ENV] = netnsMark(); // as if started from this very namespace: it is not one of the drill's own
    try {
      expect(() => new LinkCuts()).toThrow(NetnsError);
    } finally {
      if (saved === undefined) delete process.env[NETNS_ENV];
      else process.env[NETNS_ENV] = saved;
    }
    expect(() => dropRules({ from: "10.0.0.1", to: "127.0.0.1" })).toThrow(/not a loopback address/);
    expect(() => dropRules({ from: "127.0.0.2", to: "127.1.1.0/24", share: 1.5 })).toThrow(/share/);
    expect(dropRules({ from: "127.0.0.2", to: "127.1.1.0/24", share: 0.2 })).toEqual([
      ["-s", "127.0.0.2", "-d", "127.1.1.0/24", "-p", "tcp", "--syn", "-m", "statistic", "--mode", "random", "--probability", "0.2", "-j", "REJECT", "--reject-with", "tcp-reset"],
    ]);
    expect(dropRules({ from: "127.1.0.1", to: "127.0.0.1", port: 6379 })).toEqual([
      ["-s", "127.1.0.1", "-d", "127.0.0.1", "-p", "tcp", "--dport", "6379", "-j", "DROP"],
      ["-s", "127.0.0.1", "-d", "127.1.0.1", "-p", "tcp", "--sport", "6379", "-j", "DROP"],
    ]);
  });

  it.skipIf(!support.ok)("cuts and heals one link between real processes, slows and loses connections, and leaves the host alone", async () => {
    const [cmd, args] = netnsCommand([process.execPath, "--import", "tsx", CHILD]);
    const child = spawn(cmd, args, { env: { ...process.env, [NETNS_ENV]: netnsMark() }, stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const steps: Record<string, Record<string, unknown>> = {};
    let hostDuringCut: boolean | null = null;
    for await (const line of createInterface({ input: child.stdout })) {
      const o = JSON.parse(line) as { step: string } & Record<string, unknown>;
      steps[o.step] = o;
      if (o.step === "cut") {
        hostDuringCut = await hostLinkWorks();
        child.stdin.write("heal\n");
      }
    }
    const code = await new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.on("exit", (c) => r(c))));
    expect(code, stderr).toBe(0);
    expect(steps.netns.inDrillNetns).toBe(true);
    expect(typeof steps.clear.viaLink).toBe("number");
    // 150 ms each way: connect + AUTH-less PING is at least one round trip through the link.
    expect(steps.delay150.viaLink as number).toBeGreaterThanOrEqual(300);
    expect(String(steps.cut.viaLink)).toMatch(/failed/);
    expect(typeof steps.cut.from3, "another address still reaches the server: only the one link is cut").toBe("number");
    expect(hostDuringCut, "the host's loopback between the same addresses is untouched").toBe(true);
    expect(typeof steps.healed.viaLink).toBe("number");
    expect(steps.healed.rules).toBe(0);
    expect(String(steps.loss1.viaLink)).toMatch(/failed/);
    expect(steps.loss1.lost).toBe(1);
    expect(typeof steps.lossHealed.viaLink).toBe("number");
  }, 60_000);
});
