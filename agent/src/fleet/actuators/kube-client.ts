/**
 * The controller's Kubernetes API calls (repairs, rollouts): plain HTTP(S) with its own
 * ServiceAccount (the bearer token file, re-read per call since the kubelet rotates it, and the
 * cluster CA), a timeout, and an answer capped at 16 MiB. No client library, no kubectl.
 */
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

export interface KubeApiOptions {
  /** API server base URL. */
  url: string;
  /** Bearer token file (re-read per call: kubelet rotates it); null for none. */
  tokenFile: string | null;
  caFile: string | null;
  timeoutMs?: number;
}

export interface KubeReply {
  status: number;
  /** The parsed JSON answer, null when it is not JSON. */
  body: unknown;
  text: string;
}

export function kubeCall(o: KubeApiOptions, method: string, path: string, body?: unknown, contentType = "application/json"): Promise<KubeReply> {
  const url = new URL(`${o.url}${path}`);
  const headers: Record<string, string> = { accept: "application/json" };
  if (o.tokenFile) headers.authorization = `Bearer ${readFileSync(o.tokenFile, "utf8").trim()}`;
  const data = body === undefined ? undefined : JSON.stringify(body);
  if (data !== undefined) headers["content-type"] = contentType;
  const ca = url.protocol === "https:" && o.caFile ? readFileSync(o.caFile) : undefined;
  const timeout = o.timeoutMs ?? 5000;
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, { method, headers, ca, timeout }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > 16 * 1024 * 1024) req.destroy(new Error(`${method} ${url.pathname}: answer too large`));
        else chunks.push(c);
      });
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {
          parsed = null;
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, text });
      });
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${url.pathname}: no answer in ${timeout} ms`)));
    req.on("error", reject);
    req.end(data);
  });
}
