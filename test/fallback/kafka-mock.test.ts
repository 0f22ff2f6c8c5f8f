/** lab/engines/kafka-mock: kcat's mock cluster is a real Kafka-protocol broker kafkajs produces to (acks = all) and consumes from as a group. */
import { Kafka, logLevel } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
import { threadStates } from "../../lab/engines/child";
import { waitFor } from "../../agent/src/util/net";

let broker: KafkaMockHandle;
beforeAll(async () => {
  broker = await startKafkaMock();
}, 20_000);
afterAll(async () => {
  await broker?.stop();
});

describe("kafka mock broker", () => {
  it("serves three brokers on loopback, takes acks=all produces and a consumer group reads them back", async () => {
    expect(broker.brokers).toHaveLength(3);
    for (const b of broker.brokers) expect(b).toMatch(/^127\.0\.0\.1:\d+$/);
    const kafka = new Kafka({ clientId: "t", brokers: broker.brokers, logLevel: logLevel.NOTHING });
    const p = kafka.producer();
    await p.connect();
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) await p.send({ topic: "t1", acks: -1, messages: [{ key: `k${i}`, value: `v${i}` }] });
    const produceMs = (performance.now() - t0) / 20;
    await p.disconnect();
    const c = kafka.consumer({ groupId: "g1" });
    await c.connect();
    await c.subscribe({ topic: "t1", fromBeginning: true });
    const seen = new Set<string>();
    const j0 = performance.now();
    await c.run({ eachMessage: async ({ message }) => void seen.add(message.value?.toString() ?? "") });
    await waitFor("20 messages", () => seen.size === 20, { timeoutMs: 15_000 });
    const readMs = performance.now() - j0;
    await c.disconnect();
    console.log(`kcat mock: acks=all produce ${produceMs.toFixed(1)} ms each; group join + read 20 in ${readMs.toFixed(0)} ms`);
  }, 30_000);

  it("stops: the brokers refuse connections afterwards", async () => {
    const b2 = await startKafkaMock({ brokers: 1 });
    const [host, port] = b2.brokers[0].split(":");
    await b2.stop();
    const net = await import("node:net");
    const refused = await new Promise<boolean>((r) => {
      const s = net.createConnection({ host, port: Number(port) });
      s.once("connect", () => (s.destroy(), r(false)));
      s.once("error", () => r(true));
    });
    expect(refused).toBe(true);
  }, 20_000);

  it("pauses: once `pause` resolves every broker thread has stopped and no produce is acknowledged until `resume`", async () => {
    // `kill` returns before a multi-threaded process has stopped (one thread takes SIGSTOP, the
    // others run on until it stops them): a broker could still acknowledge what was sent next.
    const states: string[][] = [];
    for (let i = 0; i < 50; i++) {
      await broker.pause();
      states.push(threadStates(broker.pid));
      broker.resume();
    }
    expect(states.filter((s) => s.length === 0 || !s.every((x) => x === "T" || x === "t"))).toEqual([]);
    const kafka = new Kafka({ clientId: "t", brokers: broker.brokers, logLevel: logLevel.NOTHING });
    const p = kafka.producer();
    await p.connect();
    try {
      await p.send({ topic: "t-pause", acks: -1, messages: [{ value: "before" }] });
      await broker.pause();
      let acked = false;
      const sent = p.send({ topic: "t-pause", acks: -1, messages: [{ value: "paused" }] }).then(() => (acked = true));
      await new Promise((r) => setTimeout(r, 1000));
      expect(acked).toBe(false);
      broker.resume();
      await sent;
      expect(acked).toBe(true);
    } finally {
      broker.resume();
      await p.disconnect();
    }
  }, 30_000);
});

describe("kafka mock broker with its mock API (python3 host)", () => {
  it("fails one broker: its partitions refuse writes until their leaders move, the others keep taking them", async () => {
    const b = await startKafkaMock({ control: true });
    const kafka = new Kafka({ clientId: "t", brokers: b.brokers, logLevel: logLevel.NOTHING, retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 200 } });
    const admin = kafka.admin();
    const p = kafka.producer({ retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 200 } });
    try {
      expect(b.control).not.toBeNull();
      await b.control!.createTopic("q1", 6, 3);
      // The mock puts every leader on one broker; MSK spreads them: so does the drill.
      for (let x = 0; x < 6; x++) await b.control!.setLeader("q1", x, (x % 3) + 1);
      await admin.connect();
      // Broker ids are 1..N in bootstrap order (what the drill's placement counts on).
      const cluster = await admin.describeCluster();
      for (const [i, addr] of b.brokers.entries()) expect(cluster.brokers.find((x) => x.nodeId === i + 1 && `${x.host}:${x.port}` === addr)).toBeTruthy();
      const meta = await admin.fetchTopicMetadata({ topics: ["q1"] });
      const parts = meta.topics[0].partitions;
      expect(parts).toHaveLength(6);
      expect(parts.map((x) => x.leader).sort()).toEqual([1, 1, 2, 2, 3, 3]);
      const led = parts.filter((x) => x.leader === 1).map((x) => x.partitionId);
      await p.connect();
      const write = (partition: number): Promise<boolean> => p.send({ topic: "q1", acks: -1, timeout: 1000, messages: [{ partition, value: "v" }] }).then(() => true, () => false);
      for (const x of parts) expect(await write(x.partitionId)).toBe(true);
      await b.control!.brokerDown(1);
      expect(await write(led[0])).toBe(false);
      const other = parts.find((x) => x.leader !== 1)!.partitionId;
      expect(await write(other)).toBe(true);
      for (const [i, x] of led.entries()) await b.control!.setLeader("q1", x, 2 + (i % 2));
      await waitFor("the moved partitions take writes", async () => (await Promise.all(led.map(write))).every(Boolean), { timeoutMs: 10_000 });
      await b.control!.brokerUp(1);
      await expect(b.control!.brokerDown(9)).rejects.toThrow(/brokers 1 to 3/);
      await expect(b.control!.setLeader("q1", 99, 2)).rejects.toThrow(/mock cluster: leader q1 99 2/);
    } finally {
      await p.disconnect().catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
      await b.stop();
    }
  }, 40_000);
});
