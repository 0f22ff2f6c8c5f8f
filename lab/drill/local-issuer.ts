/**
 * The drill's ServiceAccount issuer (the local cloud serves its keys at `/openid/v1/jwks`): it
 * writes each node's projected token as kubelet does, signed by one key made on first use.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";

export class LocalIssuer {
  private signing: Promise<{ key: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"]; jwk: JWK }> | null = null;
  private jwk: JWK | null = null;

  /** `iss` of the tokens it mints (the local cloud's URL, read when a token is minted). */
  constructor(private readonly issuer: () => string) {}

  /** The public keys, as the API server's OIDC discovery serves them. */
  keys(): JWK[] {
    return this.jwk ? [this.jwk] : [];
  }

  /**
   * Writes node `nodeId`'s projected ServiceAccount token to `path` (mode 0600): audience
   * `llm-ha`, the claim shape of a real one (namespace, node, pod, ServiceAccount), valid `ttlS` seconds.
   */
  async mintToken(nodeId: string, path: string, ttlS = 6 * 3600): Promise<void> {
    // One key for every token: nodes start in parallel, so the key is made once, not per first caller.
    this.signing ??= (async () => {
      const { privateKey, publicKey } = await generateKeyPair("RS256");
      const jwk = { ...(await exportJWK(publicKey)), kid: "drill-1", alg: "RS256", use: "sig" };
      this.jwk = jwk;
      return { key: privateKey, jwk };
    })();
    const signer = await this.signing;
    const token = await new SignJWT({
      "kubernetes.io": { namespace: "llm-ha", node: { name: nodeId, uid: `node-${nodeId}` }, pod: { name: `llm-ha-agent-${nodeId}`, uid: `pod-${nodeId}` }, serviceaccount: { name: "llm-ha-agent", uid: "sa-agent" } },
    })
      .setProtectedHeader({ alg: "RS256", kid: "drill-1" })
      .setIssuer(this.issuer())
      .setAudience("llm-ha")
      .setSubject("system:serviceaccount:llm-ha:llm-ha-agent")
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttlS)
      .sign(signer.key);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, token, { mode: 0o600 });
  }
}
