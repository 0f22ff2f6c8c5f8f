/**
 * The leader's side of enrolment: each period it reads the `enrol` stream, verifies every
 * request's token (`verifyNodeToken`: the cluster's issuer, audience `llm-ha`, expiry, the node
 * claim equal to the node id, the node in the inventory), and for a good one hands out a fresh
 * capability, kept in `llmha-caps:<cluster>` (the leader's role alone reads it) and sealed to
 * the request's public key in `enrolled`. Every request is deleted once judged. A refused one is
 * counted and logged with its reason, never its token.
 */
import type { Redis } from "ioredis";
import type { JWTVerifyGetKey } from "jose";
import type { Logger } from "../../util/log";
import type { RedisKeys } from "../redis/keys";
import { keyFingerprint } from "./enrol";
import { isCapability, newCapability, sealTo, verifyNodeToken } from "./identity";

/** Requests judged per period at most (the rest wait for the next one). */
const BATCH = 200;
const NAME = /^[A-Za-z0-9_.-]{1,253}$/;

export interface EnrolmentDeskOptions {
  redis: Redis;
  keys: RedisKeys;
  /** The cluster's issuer keys. */
  jwks: () => Promise<JWTVerifyGetKey>;
  /** Expected `iss`; null: not checked. */
  issuer: string | null;
  log: Logger;
  /** Each judged request: `ok` or `refused` (metrics). */
  onJudged?: (result: "ok" | "refused") => void;
}

export class EnrolmentDesk {
  private caps = new Map<string, string>();
  private readonly log: Logger;

  constructor(private readonly o: EnrolmentDeskOptions) {
    this.log = o.log.child({ component: "enrolment" });
  }

  /** At the start of a term: the capabilities handed out so far. */
  async load(): Promise<void> {
    const h = await this.o.redis.hgetall(this.o.keys.capabilities);
    this.caps = new Map(Object.entries(h).filter(([, v]) => isCapability(v)));
  }

  /** The record key of an enrolled node, null for one not enrolled (its records are not read). */
  recordKey(nodeId: string): string | null {
    const cap = this.caps.get(nodeId);
    return cap ? this.o.keys.nodeRecord(nodeId, cap) : null;
  }

  /** Judges the waiting requests against the inventory's node ids; resolves how many were accepted and refused. */
  async process(inventory: ReadonlySet<string>): Promise<{ accepted: number; refused: number }> {
    const entries = await this.o.redis.xrange(this.o.keys.enrol, "-", "+", "COUNT", BATCH);
    if (entries.length === 0) return { accepted: 0, refused: 0 };
    const jwks = await this.o.jwks();
    let accepted = 0;
    let refused = 0;
    for (const [id, flat] of entries) {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]] = flat[i + 1];
      const nodeId = f.nodeId ?? "";
      let reason: string | null = null;
      if (!NAME.test(nodeId)) reason = "node id is not a name";
      else if (!f.token || !f.publicKey) reason = "request lacks a token or a public key";
      else {
        const v = await verifyNodeToken(f.token, nodeId, { jwks, issuer: this.o.issuer, inventory });
        if (!v.ok) reason = v.reason;
      }
      let seal: string | null = null;
      const cap = newCapability();
      if (reason === null) {
        try {
          seal = sealTo(f.publicKey, cap);
        } catch {
          reason = "public key is not an RSA key the leader can seal to";
        }
      }
      if (reason !== null || seal === null) {
        refused += 1;
        this.o.onJudged?.("refused");
        this.log.warn({ nodeId: nodeId.slice(0, 64), reason }, "enrolment refused");
      } else {
        await this.o.redis.hset(this.o.keys.capabilities, nodeId, cap);
        await this.o.redis.hset(this.o.keys.enrolled, nodeId, JSON.stringify({ seal, key: keyFingerprint(f.publicKey), at: Date.now() }));
        this.caps.set(nodeId, cap);
        accepted += 1;
        this.o.onJudged?.("ok");
        this.log.info({ nodeId }, "enrolled");
      }
      await this.o.redis.xdel(this.o.keys.enrol, id);
    }
    return { accepted, refused };
  }
}
