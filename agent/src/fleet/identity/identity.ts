/**
 * A GPU node's identity, bound to the node rather than to a credential every node holds (the
 * agent role's Redis password): the building blocks of enrolment.
 *
 * - The agent holds a short-lived projected ServiceAccount token (audience `llm-ha`) whose claim
 *   `kubernetes.io.node.name` names the node its pod runs on (Kubernetes ≥ 1.30 puts the node in
 *   projected tokens), and a key pair of its own, made at start and never written anywhere.
 * - The leader verifies the token against the cluster's issuer keys (JWKS, `jose`: algorithm,
 *   signature, audience, expiry), checks that the node claim is the node id it enrols and that
 *   the inventory lists that node, and hands back a capability: 128 random bits, the secret
 *   part of the node's record key, sealed to the agent's public key (RSA-OAEP-256) so that only
 *   that agent can read it, wherever the reply is stored.
 *
 * What is logged of a refused enrolment is the reason, never the token.
 */
import { constants, createHash, createPrivateKey, generateKeyPairSync, privateDecrypt, publicEncrypt, randomBytes, type KeyObject } from "node:crypto";
import type { JWTVerifyGetKey } from "jose";
import { NODE_IDENTITY } from "../../../../contracts/names";

/** The audience of the projected token the agents enrol with (the stack's DaemonSet asks for it). */
export const TOKEN_AUDIENCE = NODE_IDENTITY.audience;
/** Algorithms Kubernetes signs ServiceAccount tokens with; any other is refused (no `none`, no HMAC). */
const ALGORITHMS = ["RS256", "ES256", "RS384", "ES384", "RS512", "ES512", "PS256"];
/** A capability: 128 random bits, hex. */
const CAPABILITY = /^[0-9a-f]{32}$/;

export interface TokenCheck {
  /** The issuer's keys (`createRemoteJWKSet` on the cluster's `/openid/v1/jwks`, or a local set). */
  jwks: JWTVerifyGetKey;
  /** The cluster's issuer (`iss`); null: not checked (the signature binds it to the cluster's keys). */
  issuer: string | null;
  /** Node ids the inventory lists now. */
  inventory: ReadonlySet<string>;
  /** Allowed clock skew, seconds. Default 30. */
  clockToleranceS?: number;
}

export type EnrolVerdict = { ok: true } | { ok: false; reason: string };

/** Whether `token` proves that its holder runs on node `nodeId`, a node of the inventory. */
export async function verifyNodeToken(token: string, nodeId: string, c: TokenCheck): Promise<EnrolVerdict> {
  if (!c.inventory.has(nodeId)) return { ok: false, reason: `node ${JSON.stringify(nodeId.slice(0, 64))} is not in the inventory` };
  let payload: Record<string, unknown>;
  try {
    // Loaded here, by the leader only: node agents use this file for record digests, and jose costs them memory.
    const { jwtVerify } = await import("jose");
    ({ payload } = await jwtVerify(token, c.jwks, {
      audience: TOKEN_AUDIENCE,
      algorithms: ALGORITHMS,
      clockTolerance: c.clockToleranceS ?? 30,
      ...(c.issuer ? { issuer: c.issuer } : {}),
      requiredClaims: ["exp"],
    }));
  } catch (err) {
    // jose's message names the failed check (signature, "exp" claim, audience…), never the token.
    return { ok: false, reason: `token refused: ${(err as Error).message.slice(0, 120)}` };
  }
  const k8s = payload["kubernetes.io"] as { node?: { name?: unknown } } | undefined;
  const node = k8s?.node?.name;
  if (typeof node !== "string") return { ok: false, reason: "token names no node (kubernetes.io.node.name): not a projected token of a pod on a node, or Kubernetes older than 1.30" };
  if (node !== nodeId) return { ok: false, reason: `token is node ${JSON.stringify(node.slice(0, 64))}'s, enrolling ${JSON.stringify(nodeId.slice(0, 64))}` };
  return { ok: true };
}

/** A fresh capability: the secret part of a node's record key. */
export function newCapability(): string {
  return randomBytes(16).toString("hex");
}

export function isCapability(v: unknown): v is string {
  return typeof v === "string" && CAPABILITY.test(v);
}

/**
 * What the leader publishes of a capability so that readers (`llm-ha status`, `llm-ha canary`)
 * can tell a node's record among the `node:<id>:*` keys without holding the capability: the
 * first 16 hex of its SHA-256. It does not give the capability back (128 random bits behind a
 * one-way hash), so knowing it lets no one write the record.
 */
export function recordDigest(capabilityOrSuffix: string): string {
  return createHash("sha256").update(capabilityOrSuffix, "utf8").digest("hex").slice(0, 16);
}

/** Seals `plain` to an agent's public key (PEM, SPKI): only the holder of its private key opens it. */
export function sealTo(publicKeyPem: string, plain: string): string {
  return publicEncrypt({ key: publicKeyPem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" }, Buffer.from(plain, "utf8")).toString("base64");
}

/** An agent's key pair, made at start; the private key never leaves the process. */
export class NodeKeys {
  readonly publicKeyPem: string;
  private readonly privateKey: KeyObject;

  constructor() {
    const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    this.publicKeyPem = publicKey.export({ type: "spki", format: "pem" }).toString();
    this.privateKey = createPrivateKey(privateKey.export({ type: "pkcs8", format: "pem" }));
  }

  /** Opens a reply sealed to this key pair; null when it is not (another agent's, corrupted). */
  open(sealed: string): string | null {
    try {
      return privateDecrypt({ key: this.privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" }, Buffer.from(sealed, "base64")).toString("utf8");
    } catch {
      return null;
    }
  }
}
