/**
 * How the thin ARC client reaches the service: its config and the resolved form, SigV4
 * signing (`@smithy/signature-v4`, service `arc-zonal-shift`) with the default credential
 * chain (environment, IRSA web identity, instance profile…), node:http(s) with a
 * whole-request timeout, and REST-JSON errors mapped to `ARCZonalShiftServiceException`
 * named as AWS names them (`ThrottlingException`, `ValidationException`…). `invoke` sends
 * each request once: llm-ha retries in retry.ts, where every attempt is counted.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Sha256 } from "@aws-crypto/sha256-js";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { ServiceException, type ServiceExceptionOptions } from "@smithy/core/client";
import { HttpRequest } from "@smithy/protocol-http";
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider, RequestHandler, ResponseMetadata } from "@smithy/types";

/** Every error the service returns, named as AWS names it (`error.name`). */
export class ARCZonalShiftServiceException extends ServiceException {
  constructor(options: ServiceExceptionOptions) {
    super(options);
    Object.setPrototypeOf(this, ARCZonalShiftServiceException.prototype);
  }
}

export interface ARCZonalShiftClientConfig {
  /** Default `$AWS_REGION`, then `$AWS_DEFAULT_REGION`. */
  region?: string;
  /** Default `https://arc-zonal-shift.<region>.amazonaws.com` (tests point it at loopback). */
  endpoint?: string;
  /** Default: the AWS default credential chain (IRSA web identity included). */
  credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** Per request, connection included. Default 10000 ms. */
  requestTimeoutMs?: number;
  /** Accepted for parity with the official client; must be 1 (callers retry, see retry.ts). */
  maxAttempts?: number;
}

/** The raw HTTP answer before parsing. */
export interface RawHttpResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

export interface ARCZonalShiftClientResolvedConfig {
  region: string;
  endpoint: URL;
  requestHandler: RequestHandler<HttpRequest, RawHttpResponse>;
  signer: SignatureV4;
  readonly apiVersion: string;
}

export class ArcClientConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ArcClientConfigError";
  }
}

/** node:http(s) with keep-alive agents and a whole-request timeout. */
export class NodeRequestHandler implements RequestHandler<HttpRequest, RawHttpResponse> {
  private readonly http = new HttpAgent({ keepAlive: true, maxSockets: 8 });
  private readonly https = new HttpsAgent({ keepAlive: true, maxSockets: 8 });

  constructor(private readonly timeoutMs: number) {}

  handle(req: HttpRequest): Promise<{ response: RawHttpResponse }> {
    const tls = req.protocol === "https:";
    const query = Object.entries(req.query ?? {})
      .flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : v === null ? [[k]] : [[k, v]]))
      .map((kv) => kv.map(rfc3986).join("="))
      .join("&");
    return new Promise((resolve, reject) => {
      const r = (tls ? httpsRequest : httpRequest)(
        {
          host: req.hostname,
          port: req.port,
          method: req.method,
          path: query ? `${req.path}?${query}` : req.path,
          headers: req.headers,
          agent: tls ? this.https : this.http,
        },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () => {
            const headers: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(",") : v;
            resolve({ response: { statusCode: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString("utf8") } });
          });
        },
      );
      r.setTimeout(this.timeoutMs, () => {
        const err = new Error(`no answer from ${req.hostname} within ${this.timeoutMs} ms`);
        err.name = "TimeoutError";
        r.destroy(err);
      });
      r.on("error", reject);
      r.end(typeof req.body === "string" ? req.body : undefined);
    });
  }

  destroy(): void {
    this.http.destroy();
    this.https.destroy();
  }
}

/** Percent-encoding as SigV4 canonicalizes it (RFC 3986 unreserved characters kept); commands encode path ids with it too. */
export function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The client's config with its defaults; refuses what the thin client cannot honour. */
export function resolveConfig(c: ARCZonalShiftClientConfig): ARCZonalShiftClientResolvedConfig {
  const region = c.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
  if (!region) throw new ArcClientConfigError("region is required (config.region or AWS_REGION)");
  if (c.maxAttempts !== undefined && c.maxAttempts !== 1) throw new ArcClientConfigError("the thin ARC client sends each command once: maxAttempts must be 1");
  const endpoint = new URL(c.endpoint ?? `https://arc-zonal-shift.${region}.amazonaws.com`);
  const credentials = c.credentials ?? defaultProvider();
  return {
    region,
    endpoint,
    requestHandler: new NodeRequestHandler(c.requestTimeoutMs ?? 10_000),
    signer: new SignatureV4({ service: "arc-zonal-shift", region, credentials, sha256: Sha256, uriEscapePath: true }),
    apiVersion: "2022-10-30",
  };
}

/** One operation's HTTP request before signing; `undefined` query values are left out. */
export interface RestRequest {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | undefined>;
  body?: Record<string, unknown>;
}

/** A REST-JSON body as parsed, before the commands pick their fields out. */
export type Json = Record<string, unknown>;

/** A JSON field as text: "" when absent or not a string, so a missing field never reads as "undefined". */
export const text = (v: unknown): string => (typeof v === "string" ? v : "");

/** The REST-JSON error of a non-2xx answer: type from `x-amzn-errortype`, else the body's `__type`/`code`. */
function serviceError(res: RawHttpResponse, $metadata: ResponseMetadata): ARCZonalShiftServiceException {
  let body: Json = {};
  try {
    body = res.body ? (JSON.parse(res.body) as Json) : {};
  } catch {
    // not JSON (a proxy's HTML page): the status says enough
  }
  const raw = res.headers["x-amzn-errortype"] ?? text(body.__type) ?? text(body.code);
  const name = (raw || (res.statusCode >= 500 ? "InternalServerException" : `Http${res.statusCode}`)).split(":")[0].split("#").pop() ?? "UnknownError";
  const err = new ARCZonalShiftServiceException({
    name,
    $fault: res.statusCode >= 500 ? "server" : "client",
    $metadata,
    message: text(body.message) || text(body.Message) || `HTTP ${res.statusCode}`,
  });
  if (name === "ThrottlingException") err.$retryable = { throttling: true };
  return err;
}

/** Signs and sends one request; a non-2xx answer throws the service's named error. */
export async function invoke(config: ARCZonalShiftClientResolvedConfig, r: RestRequest): Promise<{ body: Json; $metadata: ResponseMetadata; response: RawHttpResponse }> {
  const e = config.endpoint;
  const body = r.body === undefined ? undefined : JSON.stringify(r.body);
  const query: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.query ?? {})) if (v !== undefined) query[k] = v;
  const request = new HttpRequest({
    protocol: e.protocol,
    hostname: e.hostname,
    port: e.port ? Number(e.port) : undefined,
    method: r.method,
    path: `${e.pathname.replace(/\/$/, "")}${r.path}`,
    query,
    headers: {
      host: e.host,
      accept: "application/json",
      ...(body === undefined ? {} : { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }),
    },
    body,
  });
  const signed = (await config.signer.sign(request)) as HttpRequest;
  const { response } = await config.requestHandler.handle(signed);
  const $metadata: ResponseMetadata = {
    httpStatusCode: response.statusCode,
    requestId: response.headers["x-amzn-requestid"],
    attempts: 1,
    totalRetryDelay: 0,
  };
  if (response.statusCode < 200 || response.statusCode >= 300) throw serviceError(response, $metadata);
  return { body: response.body ? (JSON.parse(response.body) as Json) : {}, $metadata, response };
}
