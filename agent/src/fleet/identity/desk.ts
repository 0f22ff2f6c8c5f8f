/**
 * The leader's side of enrolment: each period it reads the `enrol` stream, verifies every
 * request's token (`verifyNodeToken`: the cluster's issuer, audience `llm-ha`, expiry, the node
 * claim equal to the node id, the node in the inventory), and for a good one hands out a fresh
 * capability, kept in `llmha-caps:<cluster>` (the leader's role alone reads it) and sealed to
 * the request's public key in `enrolled`. Every request is deleted once judged. A refused one is
 * counted and logged with its reason, never its token. Readers learn only a digest of each
 * capability (`enrolled:digests`, `recordDigest`): enough to tell the node's record among the
 * `node:<id>:*` keys, never the capability itself.
 *
 * Every write of a capability, its digest and the reply is a fenced leader write (`FencedWriter`):
 * a leader deposed while it judged (its lease lost, a newer term begun) is refused by Redis,
 * steps down and judges nothing more. Unfenced, its late write landed after the new leader had
 * read the capabilities at the start of its term: the agent held a reply the new leader knew
 * nothing of, heartbeated under a key that leader never read, and showed as gone.
 */
import type { Redis } from "ioredis";
import type { JWTVerifyGetKey } from "jose";
import type { Logger } from "../../util/log";
import type { RedisKeys } from "../redis/keys";
import type { FencedWriter } from "../redis/fenced";
import { keyFingerprint } from "./enrol";
import { isCapability, newCapability, recordDigest, sealTo, verifyNodeToken } from "./identity";

/** Requests judged per period at most (the rest wait for the next one). */
const BATCH = 200;
const NAME = /^[A-Za-z0-9_.-]{1,253}$/;
/** How long a request for a node the inventory does not list yet waits before it is refused. */
const WAIT_MS = 30_000;

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
  /** The public key (fingerprint) each capability was sealed to: the same agent enrolling again keeps its capability. */
  private sealedTo = new Map<string, string>();
  /** The digests of the capabilities loaded at the start of the term, published by the term's first `process`. */
  private digestsPending = false;
  private readonly log: Logger;

  constructor(private readonly o: EnrolmentDeskOptions) {
    this.log = o.log.child({ component: "enrolment" });
  }

  /** At the start of a term: the capabilities handed out so far. */
  async load(): Promise<void> {
    const [h, replies] = await Promise.all([this.o.redis.hgetall(this.o.keys.capabilities), this.o.redis.hgetall(this.o.keys.enrolled)]);
    this.caps = new Map(Object.entries(h).filter(([, v]) => isCapability(v)));
    this.sealedTo = new Map();
    for (const [id, raw] of Object.entries(replies)) {
      try {
        const key = (JSON.parse(raw) as { key?: unknown }).key;
        if (typeof key === "string") this.sealedTo.set(id, key);
      } catch {
        // an unreadable reply: the next enrolment of that node gets a new capability
      }
    }
    // Every capability's digest, again at each term (a leader of an older version published none): fenced, in `process`.
    this.digestsPending = this.caps.size > 0;
  }

  /** The record key of an enrolled node, null for one not enrolled (its records are not read). */
  recordKey(nodeId: string): string | null {
    const cap = this.caps.get(nodeId);
    return cap ? this.o.keys.nodeRecord(nodeId, cap) : null;
  }

  /**
   * Judges the waiting requests against the inventory's node ids; resolves how many were
   * accepted and refused, and how many wait: a request for a node the list lacks, younger than
   * `WAIT_MS`, is left for a later period (a node that booted since the last list), and the
   * caller lists the inventory again.
   */
  async process(inventory: ReadonlySet<string>, writer: FencedWriter, now = Date.now()): Promise<{ accepted: number; refused: number; waiting: number }> {
    if (this.digestsPending) {
      if (!(await writer.hset(this.o.keys.recordDigests, Object.fromEntries([...this.caps].map(([id, cap]) => [id, recordDigest(cap)])))).accepted) {
        return { accepted: 0, refused: 0, waiting: 0 };
      }
      this.digestsPending = false;
    }
    const entries = await this.o.redis.xrange(this.o.keys.enrol, "-", "+", "COUNT", BATCH);
    if (entries.length === 0) return { accepted: 0, refused: 0, waiting: 0 };
    const jwks = await this.o.jwks();
    let accepted = 0;
    let refused = 0;
    let waiting = 0;
    for (const [id, flat] of entries) {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]] = flat[i + 1];
      const nodeId = f.nodeId ?? "";
      if (NAME.test(nodeId) && !inventory.has(nodeId) && now - Number(id.split("-")[0]) < WAIT_MS) {
        waiting += 1;
        continue;
      }
      let reason: string | null = null;
      if (!NAME.test(nodeId)) reason = "node id is not a name";
      else if (!f.token || !f.publicKey) reason = "request lacks a token or a public key";
      else {
        const v = await verifyNodeToken(f.token, nodeId, { jwks, issuer: this.o.issuer, inventory });
        if (!v.ok) reason = v.reason;
      }
      let seal: string | null = null;
      // The same agent (same key) enrolling again — a duplicate request, a reply it found missing — keeps its capability:
      // a new one would move its record key under it and read as the node gone until its next heartbeat.
      const fingerprint = f.publicKey ? keyFingerprint(f.publicKey) : "";
      const held = this.caps.get(nodeId);
      const cap = held && this.sealedTo.get(nodeId) === fingerprint ? held : newCapability();
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
        // Capability first: a reply is never out before the capability it seals is kept. A refused
        // write (a newer term) stops here, the request left for that term's leader to judge.
        for (const [key, value] of [
          [this.o.keys.capabilities, cap],
          [this.o.keys.recordDigests, recordDigest(cap)],
          [this.o.keys.enrolled, JSON.stringify({ seal, key: fingerprint, at: Date.now() })],
        ] as const) {
          if (!(await writer.hset(key, { [nodeId]: value })).accepted) {
            this.log.warn({ nodeId }, "enrolment not recorded: a newer leader's term began (fenced out)");
            return { accepted, refused, waiting };
          }
        }
        this.caps.set(nodeId, cap);
        this.sealedTo.set(nodeId, fingerprint);
        accepted += 1;
        this.o.onJudged?.("ok");
        if (cap !== held) this.log.info({ nodeId }, "enrolled");
      }
      await this.o.redis.xdel(this.o.keys.enrol, id);
    }
    return { accepted, refused, waiting };
  }
}
