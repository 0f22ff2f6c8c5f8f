/**
 * The building blocks of a node identity bound to the node: the leader accepts a projected
 * ServiceAccount token only when the cluster's issuer signed it, for audience `llm-ha`, not
 * expired, naming the node it enrols, a node the inventory lists; a capability sealed to one
 * agent's public key opens only with that agent's private key.
 */
import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { isCapability, newCapability, NodeKeys, sealTo, verifyNodeToken, type TokenCheck } from "../../agent/src/fleet/identity/identity";

const ISSUER = "https://oidc.eks.example/id/ABC";
let check: TokenCheck;
let sign: (claims: Record<string, unknown>, o?: { aud?: string; exp?: number; key?: "issuer" | "other" }) => Promise<string>;

beforeAll(async () => {
  const issuer = await generateKeyPair("RS256");
  const other = await generateKeyPair("RS256");
  const jwk: JWK = { ...(await exportJWK(issuer.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  check = { jwks: createLocalJWKSet({ keys: [jwk] }), issuer: ISSUER, inventory: new Set(["gpu-a1", "gpu-b1"]) };
  sign = async (claims, o = {}) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer(ISSUER)
      .setAudience(o.aud ?? "llm-ha")
      .setSubject("system:serviceaccount:llm-ha:llm-ha-agent")
      .setIssuedAt()
      .setExpirationTime(o.exp ?? Math.floor(Date.now() / 1000) + 600)
      .sign(o.key === "other" ? other.privateKey : issuer.privateKey);
});

/** The claim shape of a real projected token of a pod on a node (Kubernetes ≥ 1.30). */
const onNode = (node: string) => ({ "kubernetes.io": { namespace: "llm-ha", node: { name: node, uid: "u-1" }, pod: { name: "agent-x", uid: "u-2" }, serviceaccount: { name: "llm-ha-agent", uid: "u-3" } } });

describe("verifyNodeToken", () => {
  it("accepts the node's own token", async () => {
    expect(await verifyNodeToken(await sign(onNode("gpu-a1")), "gpu-a1", check)).toEqual({ ok: true });
  });

  it("refuses another node's token, a wrong audience, an expired token, a foreign signer, a node outside the inventory, a token without a node", async () => {
    const cases: [string, Promise<string>, string, RegExp][] = [
      ["other node", sign(onNode("gpu-b1")), "gpu-a1", /node "gpu-b1"'s, enrolling "gpu-a1"/],
      ["audience", sign(onNode("gpu-a1"), { aud: "https://kubernetes.default.svc" }), "gpu-a1", /aud/],
      ["expired", sign(onNode("gpu-a1"), { exp: Math.floor(Date.now() / 1000) - 3600 }), "gpu-a1", /exp/],
      ["signer", sign(onNode("gpu-a1"), { key: "other" }), "gpu-a1", /signature/],
      ["inventory", sign(onNode("ghost-1")), "ghost-1", /not in the inventory/],
      ["no node", sign({ "kubernetes.io": { namespace: "llm-ha" } }), "gpu-a1", /names no node/],
    ];
    for (const [name, token, id, reason] of cases) {
      const v = await verifyNodeToken(await token, id, check);
      expect(v.ok, name).toBe(false);
      if (!v.ok) expect(v.reason, name).toMatch(reason);
      if (!v.ok) expect(v.reason).not.toContain((await token).slice(-20));
    }
    expect((await verifyNodeToken("not.a.jwt", "gpu-a1", check)).ok).toBe(false);
  });
});

describe("capabilities", () => {
  it("are 128 random bits, and a sealed one opens only with its agent's key", () => {
    const cap = newCapability();
    expect(isCapability(cap)).toBe(true);
    expect(newCapability()).not.toBe(cap);
    const a = new NodeKeys();
    const b = new NodeKeys();
    const sealed = sealTo(a.publicKeyPem, cap);
    expect(a.open(sealed)).toBe(cap);
    expect(b.open(sealed)).toBeNull();
    expect(a.open("garbage")).toBeNull();
  });
});
