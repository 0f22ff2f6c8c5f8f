/**
 * The cluster's ServiceAccount issuer keys (JWKS), for the leader to verify enrolment tokens:
 * `kubernetes` reads the API server's `/openid/v1/jwks` with the pod's own ServiceAccount (the
 * standard token and CA paths), a URL reads that document (the drill's local cloud). Re-read
 * every 5 minutes (the issuer rotates keys rarely; a token signed by a key not yet seen is
 * refused until then, and its agent enrols again).
 */
import { readFileSync } from "node:fs";
import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import { getJson, InventoryError } from "../inventory/inventory";

const REFRESH_MS = 5 * 60_000;

export function jwksFromSetting(setting: string, o: { tokenFile: string; caFile: string; env: NodeJS.ProcessEnv }): () => Promise<JWTVerifyGetKey> {
  let url: URL;
  let inCluster = false;
  if (setting === "kubernetes") {
    const host = o.env.KUBERNETES_SERVICE_HOST;
    if (!host) throw new InventoryError("LLMHA_IDENTITY_JWKS=kubernetes needs KUBERNETES_SERVICE_HOST");
    url = new URL(`https://${host.includes(":") ? `[${host}]` : host}:${o.env.KUBERNETES_SERVICE_PORT ?? "443"}/openid/v1/jwks`);
    inCluster = true;
  } else {
    url = new URL(setting);
  }
  let cached: { at: number; get: JWTVerifyGetKey } | null = null;
  return async () => {
    if (cached && Date.now() - cached.at < REFRESH_MS) return cached.get;
    const headers: Record<string, string> = { accept: "application/json" };
    if (inCluster) headers.authorization = `Bearer ${readFileSync(o.tokenFile, "utf8").trim()}`;
    const ca = url.protocol === "https:" && inCluster ? readFileSync(o.caFile) : undefined;
    try {
      const set = (await getJson(url, headers, ca, 5000)) as JSONWebKeySet;
      cached = { at: Date.now(), get: createLocalJWKSet(set) };
    } catch (err) {
      if (!cached) throw err;
      cached.at = Date.now() - REFRESH_MS + 30_000; // keep the last keys, retry in 30 s
    }
    return cached.get;
  };
}
