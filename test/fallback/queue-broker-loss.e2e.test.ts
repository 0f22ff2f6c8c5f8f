/**
 * The L4 queue through one broker's loss: MSK keeps a lost broker's partitions on it
 * until the controller gives up on its session; meanwhile the fallback produces each request
 * whose key maps there to a partition another broker leads, so every opted-in request still gets
 * its 202. Real Kafka protocol: librdkafka's mock cluster with its mock API (python3 host).
 */
import { Kafka, logLevel } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupFor, kafkaClient, RequestQueue, topicFor } from "../../agent/src/edge/fallback/queue";
import { startKafkaMock, type KafkaMockHandle } from "../../lab/engines/kafka-mock";
import { waitFor } from "../../agent/src/util/net";
import { captureLogger } from "./helpers";

const topic = topicFor("c1");
let broker: KafkaMockHandle;
beforeAll(async () => {
  broker = await startKafkaMock({ control: true });
  await broker.control!.createTopic(topic, 6, 3);
  for (let x = 0; x < 6; x++) await broker.control!.setLeader(topic, x, (x % 3) + 1);
}, 20_000);
afterAll(async () => {
  await broker?.stop();
});

describe("the L4 queue when one broker is lost", () => {
  it("acknowledges every request: the lost broker's keys go to partitions the others lead; none lost", async () => {
    const { log, lines } = captureLogger();
    const q = new RequestQueue(kafkaClient({ brokers: broker.brokers, auth: "none", ssl: false, clientId: "t" }, log), topic, groupFor("c1"), log);
    let counted = 0;
    q.onRedirected = () => void (counted += 1);
    const req = (i: number) => ({ id: `r${i}`, kind: "chat" as const, path: "/v1/chat/completions" as const, body: { model: "m", messages: [] }, receivedAt: Date.now() });
    try {
      await q.enqueue(req(0));
      expect(q.redirected).toBe(0);
      await broker.control!.brokerDown(1);
      const t0 = performance.now();
      for (let i = 1; i <= 24; i++) await q.enqueue(req(i));
      const ms = (performance.now() - t0) / 24;
      // Many at once, as a fallback under load sends them: one failing must not fail the others with it
      // (it used to drop the shared producer under them: "The producer is disconnected").
      await Promise.all(Array.from({ length: 24 }, (_, i) => q.enqueue(req(25 + i))));
      // 24 keys over 6 partitions: a third map to broker 1's (some did, or this proves nothing).
      expect(q.redirected).toBeGreaterThan(0);
      expect(lines.some((l) => /partition unwritable/.test(l))).toBe(true);
      expect(counted).toBe(q.redirected);
      console.log(`one broker down: 24 acks=all enqueues one by one (${ms.toFixed(0)} ms each on average) and 24 at once, ${q.redirected} redirected`);
      await broker.control!.brokerUp(1);
      // Every acknowledged request is in the topic.
      const kafka = new Kafka({ clientId: "r", brokers: broker.brokers, logLevel: logLevel.NOTHING });
      const c = kafka.consumer({ groupId: "check" });
      const seen = new Set<string>();
      await c.connect();
      await c.subscribe({ topic, fromBeginning: true });
      await c.run({ eachMessage: async ({ message }) => void seen.add(message.key?.toString() ?? "") });
      await waitFor("49 requests read back", () => seen.size === 49, { timeoutMs: 20_000 });
      await c.disconnect();
    } finally {
      await q.close();
    }
  }, 60_000);
});
