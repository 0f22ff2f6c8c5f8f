/**
 * A ServiceAccount token issuer for tests of node identities: one RS256 key, its JWKS (as the
 * API server's `/openid/v1/jwks` serves it), and `tokenOf(node)`, a token shaped like a
 * projected one (audience `llm-ha`, issuer `https://issuer.local`, the node in
 * `kubernetes.io.node.name`), valid ten minutes.
 */
import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type JWTVerifyGetKey } from "jose";

export const TEST_ISSUER = "https://issuer.local";

export async function testIssuer(): Promise<{ jwks: JWTVerifyGetKey; tokenOf: (node: string) => Promise<string> }> {
  const key = await generateKeyPair("RS256");
  const jwks = createLocalJWKSet({ keys: [{ ...(await exportJWK(key.publicKey)), kid: "k1", alg: "RS256", use: "sig" }] });
  const tokenOf = (node: string): Promise<string> =>
    new SignJWT({ "kubernetes.io": { namespace: "llm-ha", node: { name: node, uid: `u-${node}` }, pod: { name: `agent-${node}`, uid: "p" }, serviceaccount: { name: "llm-ha-agent", uid: "s" } } })
      .setProtectedHeader({ alg: "RS256", kid: "k1" }).setIssuer(TEST_ISSUER).setAudience("llm-ha")
      .setSubject("system:serviceaccount:llm-ha:llm-ha-agent").setIssuedAt().setExpirationTime("10m").sign(key.privateKey);
  return { jwks, tokenOf };
}
