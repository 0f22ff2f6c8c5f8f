/** lab/engines/kafka-mock: kcat's mock cluster is a real Kafka-protocol broker kafkajs produces to (acks = all) and consumes from as a group. */
import { Kafka, logLevel } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
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
});
