/**
 * The gray scenarios' pieces that need no root: placement as AWS has it, the AZ proxy connecting from
 * its own address, the delay/loss link (bytes held in order, a lost connection hears nothing), and
 * the queue probe that fails the Kafka broker placed in an AZ.
 */
import { connect, createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { LinkOptionError, LossyLink } from "../../lab/engines/lossy-link";
import { connectFrom, placeMembers, redisServerIn } from "../../lab/drill/placement";
import { QueueProbe } from "../../lab/drill/scenarios/queue-probe";

describe("placement", () => {
  it("puts the primary and the replica in different AZs, a sentinel and a broker in each", () => {
    const p = placeMembers(["az-a", "az-b", "az-c"]);
    expect(p.redisServers).toEqual(["az-a", "az-b"]);
    expect(p.sentinels).toEqual(["az-a", "az-b", "az-c"]);
    expect(p.brokers).toEqual(["az-a", "az-b", "az-c"]);
    expect(redisServerIn(p, "az-a")).toBe(0);
    expect(redisServerIn(p, "az-c")).toBeNull();
  });

  it("makes an AZ proxy's server connections leave from its own address", () => {
    expect(connectFrom("global\n  maxconn 1\n\ndefaults\n  mode http\n", "127.0.0.2")).toBe("global\n  maxconn 1\n\ndefaults\n  source 127.0.0.2\n  mode http\n");
    expect(() => connectFrom("global\n", "127.0.0.2")).toThrow(/defaults/);
  });
});

describe("the L4 queue probe of az-power-interruption", () => {
  it("takes down the broker placed in the AZ; every write is still acknowledged, the lost broker's keys redirected", async () => {
    const t0 = Date.now();
    const probe = await QueueProbe.start({ cluster: "c1", placement: placeMembers(["az-a", "az-b", "az-c"]), now: () => Date.now() - t0 });
    try {
      const from = Date.now() - t0;
      await probe.failAz("az-a");
      await new Promise((r) => setTimeout(r, 2500));
      const f = probe.figures(from, Date.now() - t0);
      expect(f.failedBrokers).toEqual(["broker 1 (az-a)"]);
      expect(f.writes).toBeGreaterThan(5);
      expect(f.failed).toBe(0);
      expect(f.redirected).toBeGreaterThan(0);
      await probe.healAz();
    } finally {
      await probe.stop();
    }
  }, 30_000);
});

describe("the chaos campaign's broker fault", () => {
  it("takes one broker even where the AZ holds two (two AZs, three brokers: chaos seed 9 took both)", async () => {
    const p = placeMembers(["az-a", "az-b"]);
    expect(p.brokers).toEqual(["az-a", "az-b", "az-a"]);
    const probe = await QueueProbe.start({ cluster: "c2", placement: p, now: () => 0 });
    try {
      expect(await probe.failBroker("az-a")).toEqual([1]);
      await probe.healAz();
    } finally {
      await probe.stop();
    }
  }, 30_000);
});

describe("LossyLink", () => {
  let echo: Server | null = null;
  let link: LossyLink | null = null;
  afterEach(async () => {
    await link?.close();
    echo?.close();
  });

  async function start(): Promise<LossyLink> {
    echo = createServer((s) => s.on("data", (d) => s.write(d)));
    await new Promise<void>((r) => echo!.listen(0, "127.0.0.1", () => r()));
    link = await LossyLink.start({ listen: { host: "127.0.0.1" }, target: { host: "127.0.0.1", port: (echo.address() as { port: number }).port } });
    return link;
  }

  /** Sends the chunks one by one; resolves what came back and how long the whole took (null: nothing within `limitMs`). */
  function exchange(l: LossyLink, chunks: string[], limitMs: number): Promise<{ got: string; ms: number } | null> {
    const want = chunks.join("");
    return new Promise((resolve) => {
      const t = Date.now();
      let got = "";
      // Each chunk 5 ms after the one before, set from the one before: timers of different lengths set at once
      // can run out of order when the loop runs late, and the test is about order.
      const send = (i: number): void => {
        if (i >= chunks.length || c.destroyed) return;
        c.write(chunks[i]);
        setTimeout(() => send(i + 1), 5);
      };
      const c = connect(l.port, "127.0.0.1", () => send(0));
      const timer = setTimeout(() => (c.destroy(), resolve(null)), limitMs);
      c.on("data", (d) => {
        got += d.toString();
        if (got.length >= want.length) {
          clearTimeout(timer);
          c.destroy();
          resolve({ got, ms: Date.now() - t });
        }
      });
      c.on("error", () => undefined);
    });
  }

  it("holds every byte the delay each way, in order", async () => {
    const l = await start();
    const quick = await exchange(l, ["a"], 2000);
    expect(quick?.got).toBe("a");
    l.setDelay(100);
    const slow = await exchange(l, ["1", "2", "3", "4"], 3000);
    expect(slow?.got).toBe("1234");
    expect(slow!.ms).toBeGreaterThanOrEqual(200);
    l.heal();
    expect((await exchange(l, ["b"], 2000))?.got).toBe("b");
  });

  it("keeps the order of many chunks while the event loop is busy (one timer per chunk could fire out of order)", async () => {
    const l = await start();
    l.setDelay(30);
    const n = 300;
    const chunks = Array.from({ length: n }, (_, i) => `${i};`);
    const got = await new Promise<string>((resolve) => {
      let text = "";
      const c = connect(l.port, "127.0.0.1", () => {
        let i = 0;
        const next = (): void => {
          if (i >= n) return;
          c.write(chunks[i++]);
          // Busy ticks of varying length: the loop's cached clock lags Date.now() by a different amount each time.
          const until = Date.now() + (i % 7);
          while (Date.now() < until) { /* spin */ }
          setImmediate(next);
        };
        next();
      });
      const timer = setTimeout(() => (c.destroy(), resolve(text)), 15_000);
      c.on("data", (d) => {
        text += d.toString();
        if (text.split(";").length > n) {
          clearTimeout(timer);
          c.destroy();
          resolve(text);
        }
      });
      c.on("error", () => undefined);
    });
    expect(got).toBe(chunks.join(""));
  });

  it("loses the share of new connections it is told to, and refuses nonsense", async () => {
    const l = await start();
    l.setLoss(1);
    expect(await exchange(l, ["x"], 500)).toBeNull();
    expect(l.lost).toBe(1);
    l.setLoss(0);
    expect((await exchange(l, ["y"], 2000))?.got).toBe("y");
    expect(() => l.setLoss(2)).toThrow(LinkOptionError);
    expect(() => l.setDelay(-1)).toThrow(LinkOptionError);
  });
});
