/**
 * The durable queue of L4: requests that opted in are produced to Kafka (topic per cluster,
 * key = request id, acks = all) and answered 202 only once the broker acknowledged them. A
 * request whose partition's leader is lost (its broker's AZ down: the controller moves the
 * leader only after the broker's session times out) goes to a partition another broker leads.
 * kafkajs; on AWS, MSK with IAM auth (SASL OAUTHBEARER carrying a SigV4-presigned
 * `kafka-cluster:Connect` URL, what aws-msk-iam-sasl-signer-js builds) over TLS.
 */
import { Kafka, logLevel, Partitioners, type Admin, type KafkaConfig, type Message, type PartitionMetadata, type Producer, type SASLOptions } from "kafkajs";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { HttpRequest } from "@smithy/protocol-http";
import type { AwsCredentialIdentityProvider } from "@smithy/types";
import type { Logger } from "../../util/log";
import type { RequestKind } from "./normalize";

export class QueueUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "QueueUnavailableError";
  }
}

export type KafkaAuth = "none" | "msk-iam";

export interface KafkaSettings {
  brokers: string[];
  auth: KafkaAuth;
  /** TLS to the brokers (MSK IAM needs it). */
  ssl: boolean;
  /** AWS region for MSK IAM. */
  region?: string;
  clientId: string;
  /** Credentials for MSK IAM; default the AWS SDK's chain (IRSA / pod identity in EKS). */
  credentials?: AwsCredentialIdentityProvider;
}

/** What is produced: enough to replay the request later. */
export interface QueuedRequest {
  id: string;
  kind: RequestKind;
  path: "/v1/chat/completions" | "/v1/completions";
  body: Record<string, unknown>;
  /** Epoch ms the fallback received it. */
  receivedAt: number;
  /** The tenant that queued it (absent in messages of older versions: the anonymous tenant). */
  tenant?: string;
}

/** The topic of a cluster: `llmha.<cluster>.requests`. */
export function topicFor(cluster: string): string {
  return `llmha.${cluster}.requests`;
}

/** The replay consumer group of a cluster. */
export function groupFor(cluster: string): string {
  return `llmha.${cluster}.replay`;
}

/**
 * The MSK IAM token: base64url of `https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-…&User-Agent=…`,
 * presigned (SigV4, service `kafka-cluster`, 900 s).
 */
export async function mskIamToken(region: string, credentials: AwsCredentialIdentityProvider, now = new Date()): Promise<{ value: string; expiresAt: number }> {
  const signer = new SignatureV4({ service: "kafka-cluster", region, credentials, sha256: Sha256, applyChecksum: false });
  const req = new HttpRequest({ method: "GET", protocol: "https:", hostname: `kafka.${region}.amazonaws.com`, path: "/", headers: { host: `kafka.${region}.amazonaws.com` }, query: { Action: "kafka-cluster:Connect" } });
  const signed = await signer.presign(req, { expiresIn: 900, signingDate: now });
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(signed.query ?? {})) if (typeof v === "string") q.set(k, v);
  q.set("User-Agent", "llm-ha-fallback");
  const url = `https://kafka.${region}.amazonaws.com/?${q.toString()}`;
  return { value: Buffer.from(url).toString("base64url"), expiresAt: now.getTime() + 900_000 };
}

async function defaultCredentials(): Promise<AwsCredentialIdentityProvider> {
  const { defaultProvider } = await import("@aws-sdk/credential-provider-node");
  return defaultProvider();
}

/** A kafkajs client for the settings; quick to fail (the fallback must answer 503 fast, not hang). */
export function kafkaClient(s: KafkaSettings, log: Logger): Kafka {
  return new Kafka(kafkaClientConfig(s, log));
}

/**
 * The kafkajs configuration of the settings: with `msk-iam`, SASL OAUTHBEARER whose token is
 * made on each (re)authentication from the credentials chain, and TLS on whatever `ssl` says.
 * Nothing secret is in it but the token provider (a function).
 */
export function kafkaClientConfig(s: KafkaSettings, log: Logger): KafkaConfig {
  let sasl: SASLOptions | undefined;
  if (s.auth === "msk-iam") {
    const region = s.region;
    if (!region) throw new QueueUnavailableError("MSK IAM auth needs a region (LLMHA_KAFKA_REGION or AWS_REGION)");
    let creds: AwsCredentialIdentityProvider | undefined = s.credentials;
    sasl = {
      mechanism: "oauthbearer",
      oauthBearerProvider: async () => {
        creds ??= await defaultCredentials();
        const t = await mskIamToken(region, creds);
        return { value: t.value };
      },
    };
  }
  const kl = log.child({ component: "kafka" });
  const cfg: KafkaConfig = {
    clientId: s.clientId,
    brokers: s.brokers,
    ssl: s.ssl || s.auth === "msk-iam",
    sasl,
    connectionTimeout: 1500,
    requestTimeout: 5000,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, log: entry }) => {
      const { message, timestamp: _t, logger: _l, ...rest } = entry ?? { message: "" };
      if (level <= logLevel.ERROR) kl.warn({ namespace, ...rest }, message);
      else kl.debug({ namespace, ...rest }, message);
    },
  };
  return cfg;
}

/** The replay group's lag on the queue topic. */
export interface LagSample {
  /** Uncommitted messages summed over partitions. */
  total: number;
  /** Per partition (only those with a lag). */
  byPartition: Map<number, number>;
}

/** The producer side and the queue's depth. */
export class RequestQueue {
  private producer: Producer | null = null;
  private connecting: Promise<Producer> | null = null;
  private admin: Admin | null = null;
  /** Produced by this process since the last lag sample. */
  private producedSinceSample = 0;
  private lastLag: number | null = null;
  /** The producer's partitioner (kafkajs's default, Java-compatible), to know where a key went. */
  private readonly partitioner = Partitioners.DefaultPartitioner();
  /** The topic's partitions as the producer last saw them (its own metadata, handed to its partitioner on each send). */
  private partitionMetadata: PartitionMetadata[] = [];
  /** When a produce was last acknowledged (ms since the epoch; 0 never). */
  private lastAckAt = 0;
  /** Requests produced to another partition than their key's, their leader being unreachable. */
  redirected = 0;
  /** Called on each of those (the metrics' counter). */
  onRedirected: (() => void) | null = null;

  constructor(
    private readonly kafka: Kafka,
    readonly topic: string,
    readonly groupId: string,
    private readonly log: Logger,
    readonly produceTimeoutMs = 5000,
  ) {}

  private async connected(): Promise<Producer> {
    if (this.producer) return this.producer;
    this.connecting ??= (async () => {
      // kafkajs's default partitioner (the one `partitionAwayFrom` asks), watched: it is handed the producer's metadata on every send.
      const createPartitioner = (): ReturnType<typeof Partitioners.DefaultPartitioner> => (args) => {
        if (args.topic === this.topic) this.partitionMetadata = args.partitionMetadata;
        return this.partitioner(args);
      };
      const p = this.kafka.producer({ allowAutoTopicCreation: true, createPartitioner, retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 } });
      p.on(p.events.DISCONNECT, () => {
        if (this.producer === p) this.producer = null;
      });
      try {
        await p.connect();
      } catch (err) {
        await p.disconnect().catch(() => undefined);
        throw err;
      }
      this.producer = p;
      return p;
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /** Creates the topic when absent (the mock broker refuses CreateTopics: it then creates it on a metadata request). */
  async ensureTopic(retentionS: number, partitions = 6, replicationFactor = -1): Promise<void> {
    const admin = this.kafka.admin();
    // Queued prompts are user data: they are kept no longer than this (LLMHA_FALLBACK_PROMPT_RETENTION_S).
    const retention = { name: "retention.ms", value: String(retentionS * 1000) };
    try {
      await admin.connect();
      const topics = await admin.listTopics();
      if (topics.includes(this.topic)) {
        await admin.alterConfigs({ validateOnly: false, resources: [{ type: 2 /* TOPIC */, name: this.topic, configEntries: [retention] }] })
          .catch((err: unknown) => this.log.warn({ topic: this.topic, err: (err as Error).message }, "retention of the existing topic not set"));
        return;
      }
      try {
        await admin.createTopics({ topics: [{ topic: this.topic, numPartitions: partitions, replicationFactor, configEntries: [retention] }], waitForLeaders: true });
      } catch (err) {
        this.log.info({ topic: this.topic, err: (err as Error).message }, "createTopics refused; relying on auto-creation");
        await admin.fetchTopicMetadata({ topics: [this.topic] }).catch(() => undefined);
      }
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  /** Produces with acks = all and resolves once the broker acknowledged; `QueueUnavailableError` otherwise. */
  async enqueue(req: QueuedRequest): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new QueueUnavailableError(`no broker acknowledgement within ${this.produceTimeoutMs} ms`)), this.produceTimeoutMs);
    });
    try {
      await Promise.race([
        (async () => {
          const p = await this.connected();
          const message: Message = { key: req.id, value: JSON.stringify(req) };
          const send = (m: Message): Promise<unknown> => p.send({ topic: this.topic, acks: -1, timeout: this.produceTimeoutMs, messages: [m] });
          try {
            await send(message);
          } catch (err) {
            const other = this.partitionAwayFrom(message);
            if (other === null) throw err;
            this.log.warn({ topic: this.topic, partition: other, err: (err as Error).message }, "partition unwritable; request produced to a partition another broker leads");
            await send({ ...message, partition: other });
            this.redirected += 1;
            this.onRedirected?.();
          }
        })(),
        timeout,
      ]);
      this.producedSinceSample += 1;
      this.lastAckAt = Date.now();
    } catch (err) {
      // A fresh connection next time: kafkajs keeps a producer that lost every broker "connected".
      // Not while it still gets acknowledgements (one broker lost): the requests in flight on it would fail with it.
      if (Date.now() - this.lastAckAt > this.produceTimeoutMs) {
        const p = this.producer;
        this.producer = null;
        if (p) void p.disconnect().catch(() => undefined);
      }
      if (err instanceof QueueUnavailableError) throw err;
      throw new QueueUnavailableError(`Kafka: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Messages produced and not yet committed by the replay group (consumer lag), sampled now:
   * per partition the end offset minus the group's committed offset (the low watermark where
   * the group has committed nothing), summed.
   */
  async sampleLag(): Promise<number> {
    return (await this.sampleLagDetail()).total;
  }

  /**
   * A partition led by another broker than the one the message's key maps to (the producer's
   * own metadata: no admin connection, which may land on the lost broker), picked at random
   * among them; null when there is none (one broker, or no leader anywhere).
   */
  private partitionAwayFrom(message: Message): number | null {
    const partitionMetadata = this.partitionMetadata;
    if (partitionMetadata.length < 2) return null;
    const mapped = this.partitioner({ topic: this.topic, partitionMetadata, message });
    const lost = partitionMetadata.find((x) => x.partitionId === mapped)?.leader;
    const others = partitionMetadata.filter((x) => x.leader >= 0 && x.leader !== lost);
    return others.length ? others[Math.floor(Math.random() * others.length)].partitionId : null;
  }

  /** The admin connection, made once; dropped after a failure (the next call makes a fresh one). */
  private async withAdmin<T>(fn: (a: Admin) => Promise<T>): Promise<T> {
    if (!this.admin) {
      const a = this.kafka.admin();
      await a.connect();
      this.admin = a;
    }
    const admin = this.admin;
    try {
      return await fn(admin);
    } catch (err) {
      if (this.admin === admin) this.admin = null;
      void admin.disconnect().catch(() => undefined);
      throw err;
    }
  }

  async sampleLagDetail(): Promise<LagSample> {
    return this.withAdmin(async (admin) => {
      const [ends, committed] = await Promise.all([admin.fetchTopicOffsets(this.topic), admin.fetchOffsets({ groupId: this.groupId, topics: [this.topic] })]);
      const done = new Map<number, number>();
      for (const t of committed) for (const p of t.partitions) done.set(p.partition, Number(p.offset));
      let lag = 0;
      const byPartition = new Map<number, number>();
      for (const e of ends) {
        const c = done.get(e.partition) ?? -1;
        const start = c >= 0 ? c : Number(e.low);
        const n = Math.max(0, Number(e.high) - start);
        if (n > 0) byPartition.set(e.partition, n);
        lag += n;
      }
      this.lastLag = lag;
      this.producedSinceSample = 0;
      return { total: lag, byPartition };
    });
  }

  /** Best estimate of the depth without a round trip: the last sample plus what was produced since. */
  get depth(): number | null {
    return this.lastLag === null ? null : this.lastLag + this.producedSinceSample;
  }

  async close(): Promise<void> {
    const p = this.producer;
    this.producer = null;
    await Promise.all([p?.disconnect().catch(() => undefined), this.admin?.disconnect().catch(() => undefined)]);
    this.admin = null;
  }
}
