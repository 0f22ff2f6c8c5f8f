/**
 * The agent's side of enrolment: it appends `{nodeId, token, publicKey}` to the `enrol` stream
 * (its role may only append there), then waits for the leader's reply in `enrolled`: its
 * capability sealed to its public key. The capability names its record key
 * (`node:<id>:<capability>`): the only record the leader reads for this node. It enrols again
 * when the reply it holds is gone or is no longer its own (the leader lost its capabilities,
 * another enrolment of this node id replaced it).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import type { Logger } from "../../util/log";
import { sleep } from "../../util/net";
import type { RedisKeys } from "../redis/keys";
import { isCapability, NodeKeys } from "./identity";

/** The first 16 hex of a public key's SHA-256: which key a reply is sealed to. */
export function keyFingerprint(publicKeyPem: string): string {
  return createHash("sha256").update(publicKeyPem).digest("hex").slice(0, 16);
}

export interface EnrolmentOptions {
  redis: Redis;
  keys: RedisKeys;
  nodeId: string;
  /** The projected ServiceAccount token (audience `llm-ha`), re-read on every enrolment: kubelet rotates it. */
  tokenFile: string;
  log: Logger;
  /** How often the reply is polled while waiting. Default 200 ms. */
  pollMs?: number;
}

export class Enrolment {
  private readonly nodeKeys = new NodeKeys();
  private readonly fingerprint: string;
  private cap: string | null = null;
  private readonly log: Logger;

  constructor(private readonly o: EnrolmentOptions) {
    this.fingerprint = keyFingerprint(this.nodeKeys.publicKeyPem);
    this.log = o.log.child({ component: "enrolment" });
  }

  /** This node's record key, null until enrolled. */
  get recordKey(): string | null {
    return this.cap ? this.o.keys.nodeRecord(this.o.nodeId, this.cap) : null;
  }

  /** The reply for this node, opened: its capability, or null (none, another key's, unreadable). */
  private async reply(): Promise<string | null> {
    const raw = await this.o.redis.hget(this.o.keys.enrolled, this.o.nodeId);
    if (!raw) return null;
    try {
      const r = JSON.parse(raw) as { seal?: unknown; key?: unknown };
      if (r.key !== this.fingerprint || typeof r.seal !== "string") return null;
      const cap = this.nodeKeys.open(r.seal);
      return isCapability(cap) ? cap : null;
    } catch {
      return null;
    }
  }

  /** Whether the capability held is still the one the leader answered (else: enrol again). */
  async stillValid(): Promise<boolean> {
    if (!this.cap) return false;
    const cap = await this.reply();
    if (cap === this.cap) return true;
    this.log.warn({ nodeId: this.o.nodeId }, "the leader no longer holds this node's capability: enrolling again");
    this.cap = null;
    return false;
  }

  /** Sends an enrolment and waits up to `timeoutMs` for the reply; resolves the record key or null. */
  async enrol(timeoutMs: number): Promise<string | null> {
    const token = readFileSync(this.o.tokenFile, "utf8").trim();
    await this.o.redis.xadd(this.o.keys.enrol, "MAXLEN", "~", "10000", "*", "nodeId", this.o.nodeId, "token", token, "publicKey", this.nodeKeys.publicKeyPem);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const cap = await this.reply();
      if (cap) {
        this.cap = cap;
        this.log.info({ nodeId: this.o.nodeId }, "enrolled: heartbeating under this node's own record key");
        return this.recordKey;
      }
      await sleep(this.o.pollMs ?? 200);
    }
    return null;
  }
}
