/**
 * The L4 queue as the L1 pods hold it, through an AZ's loss: a Kafka cluster whose
 * brokers are placed in the AZs (placement.brokers, broker i+1 in brokers[i]), a topic of six
 * partitions with replication factor 3 and its leaders spread over the brokers (as MSK keeps
 * them), and the fallback's own `RequestQueue` enqueuing a request every 100 ms throughout.
 * `failAz` takes the brokers placed in the AZ down (librdkafka's mock API); their partitions
 * keep them as leader, as MSK's controller does until the broker's ZooKeeper session times out
 * (`zookeeper.session.timeout.ms`, 18 s by default) — longer than the scenario holds. Judged:
 * every enqueue acknowledged, however long the lost broker's partitions stay leaderless.
 */
import { createLogger } from "../../../agent/src/util/log";
import { groupFor, kafkaClient, RequestQueue, topicFor } from "../../../agent/src/edge/fallback/queue";
import { startKafkaMock, type KafkaMockHandle } from "../../engines/kafka-mock";
import type { DrillPlacement } from "../placement";

const PARTITIONS = 6;
const EVERY_MS = 100;
const MAX_IN_FLIGHT = 20;

export interface QueueWrite {
  /** Drill clock (ms) when sent. */
  t: number;
  ms: number;
  ok: boolean;
  /** Why it was not acknowledged. */
  err?: string;
}

export interface QueueProbeFigures {
  writes: number;
  failed: number;
  /** Produced to another partition than their key's (leader unreachable). */
  redirected: number;
  /** Slowest acknowledgement, ms. */
  maxMs: number;
  /** Brokers taken down, with their AZ. */
  failedBrokers: string[];
}

export class QueueProbe {
  private readonly writes: QueueWrite[] = [];
  private timer: NodeJS.Timeout | null = null;
  private inFlight = 0;
  private seq = 0;
  /** Brokers down now, and every broker this probe took down. */
  private readonly down = new Set<number>();
  private readonly lost: number[] = [];

  private constructor(
    private readonly kafka: KafkaMockHandle,
    private readonly queue: RequestQueue,
    private readonly placement: DrillPlacement,
    private readonly now: () => number,
  ) {}

  static async start(o: { cluster: string; placement: DrillPlacement; now: () => number }): Promise<QueueProbe> {
    const kafka = await startKafkaMock({ control: true, brokers: o.placement.brokers.length });
    try {
      const topic = topicFor(o.cluster);
      const n = o.placement.brokers.length;
      await kafka.control!.createTopic(topic, PARTITIONS, Math.min(3, n));
      for (let p = 0; p < PARTITIONS; p++) await kafka.control!.setLeader(topic, p, (p % n) + 1);
      const log = createLogger({ level: "silent" });
      const queue = new RequestQueue(kafkaClient({ brokers: kafka.brokers, auth: "none", ssl: false, clientId: "llmha-drill-queue" }, log), topic, groupFor(o.cluster), log);
      const probe = new QueueProbe(kafka, queue, o.placement, o.now);
      await probe.write();
      if (!probe.writes[0]?.ok) throw new Error("the queue took no write before the fault");
      probe.timer = setInterval(() => void probe.write(), EVERY_MS);
      return probe;
    } catch (err) {
      await kafka.stop();
      throw err;
    }
  }

  private async write(): Promise<void> {
    if (this.inFlight >= MAX_IN_FLIGHT) return;
    this.inFlight += 1;
    const t = this.now();
    const id = `drill-${++this.seq}`;
    let err: string | undefined;
    try {
      await this.queue.enqueue({ id, kind: "chat", path: "/v1/chat/completions", body: { model: "drill", messages: [{ role: "user", content: id }] }, receivedAt: Date.now() });
    } catch (e) {
      err = (e as Error).message;
    } finally {
      this.inFlight -= 1;
    }
    this.writes.push({ t, ms: this.now() - t, ok: err === undefined, ...(err === undefined ? {} : { err }) });
  }

  /** One broker lost: the first placed in `az` (with fewer AZs than brokers an AZ holds more than one); resolves its id. */
  async failBroker(az: string): Promise<number[]> {
    return this.failAz(az, 1);
  }

  /** The brokers placed in `az` lose power (at most `most` of them); resolves their ids. */
  async failAz(az: string, most = Infinity): Promise<number[]> {
    const ids: number[] = [];
    for (const [i, where] of this.placement.brokers.entries()) {
      if (where !== az || ids.length >= most) continue;
      await this.kafka.control!.brokerDown(i + 1);
      this.down.add(i + 1);
      if (!this.lost.includes(i + 1)) this.lost.push(i + 1);
      ids.push(i + 1);
    }
    return ids;
  }

  /** Power back: the brokers down now answer again. */
  async healAz(): Promise<void> {
    for (const id of [...this.down]) {
      await this.kafka.control!.brokerUp(id);
      this.down.delete(id);
    }
  }

  /** Writes not acknowledged so far (drill clock). */
  failures(): QueueWrite[] {
    return this.writes.filter((x) => !x.ok);
  }

  /** Writes sent in [from, to) (drill clock), and the lost brokers. */
  figures(from: number, to: number): QueueProbeFigures {
    const w = this.writes.filter((x) => x.t >= from && x.t < to);
    return {
      writes: w.length,
      failed: w.filter((x) => !x.ok).length,
      redirected: this.queue.redirected,
      maxMs: w.reduce((m, x) => Math.max(m, x.ms), 0),
      failedBrokers: this.lost.map((id) => `broker ${id} (${this.placement.brokers[id - 1]})`),
    };
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const end = Date.now() + 6000;
    while (this.inFlight > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    await this.queue.close();
    await this.kafka.stop();
  }
}
