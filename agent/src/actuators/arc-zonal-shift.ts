/**
 * A thin client for the ARC zonal shift API (REST-JSON, `arc-zonal-shift` 2022-10-30), with
 * the class, command, input and output names of `@aws-sdk/client-arc-zonal-shift`, which
 * this machine's npm registry does not carry. It builds on the same Smithy `Client` and
 * `Command` base classes as the official clients, so `mockClient(ARCZonalShiftClient)` from
 * aws-sdk-client-mock stubs it the same way, and moving to the official package is one
 * import line in aws.ts (and in the tests):
 *
 *   import { ARCZonalShiftClient, … } from "@aws-sdk/client-arc-zonal-shift";
 *
 * What it does: builds the request for each of the five operations llm-ha uses, signs it
 * with SigV4 (`@smithy/signature-v4`, service `arc-zonal-shift`) using the default
 * credential chain (environment, IRSA web identity, instance profile…), sends it over
 * node:http(s) with a timeout, and maps REST-JSON errors to `ARCZonalShiftServiceException`
 * named as AWS names them (`ThrottlingException`, `ValidationException`…). It sends each
 * command once: llm-ha retries in retry.ts, where every attempt is counted.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Sha256 } from "@aws-crypto/sha256-js";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { Client, Command, ServiceException, type ServiceExceptionOptions } from "@smithy/core/client";
import { HttpRequest } from "@smithy/protocol-http";
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider, Handler, MetadataBearer, MiddlewareStack, RequestHandler, ResponseMetadata } from "@smithy/types";

export type ZonalShiftStatus = "ACTIVE" | "EXPIRED" | "CANCELED";

/** A zonal shift as Start/Update/Cancel return it. */
export interface ZonalShift {
  zonalShiftId: string;
  resourceIdentifier: string;
  /** AZ ID (`use1-az1`), not the account-specific AZ name. */
  awayFrom: string;
  expiryTime: Date;
  startTime: Date;
  status: ZonalShiftStatus;
  comment: string;
}

export interface ZonalShiftSummary extends ZonalShift {
  shiftType?: string;
  practiceRunOutcome?: string;
}

export interface ZonalShiftInResource {
  zonalShiftId: string;
  resourceIdentifier: string;
  awayFrom: string;
  expiryTime: Date;
  startTime: Date;
  comment: string;
  appliedStatus: string;
  shiftType?: string;
  practiceRunOutcome?: string;
}

export interface StartZonalShiftCommandInput {
  /** ARN of the load balancer. */
  resourceIdentifier: string;
  /** AZ ID to move traffic away from, e.g. `use1-az1`. */
  awayFrom: string;
  /** `<n>m` or `<n>h`, at most 72 h. */
  expiresIn: string;
  /** At most 128 characters; only the latest comment is kept. */
  comment: string;
}
export type StartZonalShiftCommandOutput = ZonalShift & MetadataBearer;

export interface UpdateZonalShiftCommandInput {
  zonalShiftId: string;
  expiresIn?: string;
  comment?: string;
}
export type UpdateZonalShiftCommandOutput = ZonalShift & MetadataBearer;

export interface CancelZonalShiftCommandInput {
  zonalShiftId: string;
}
export type CancelZonalShiftCommandOutput = ZonalShift & MetadataBearer;

export interface ListZonalShiftsCommandInput {
  resourceIdentifier?: string;
  status?: ZonalShiftStatus;
  nextToken?: string;
  maxResults?: number;
}
export interface ListZonalShiftsCommandOutput extends MetadataBearer {
  items?: ZonalShiftSummary[];
  nextToken?: string;
}

export interface GetManagedResourceCommandInput {
  resourceIdentifier: string;
}
export interface GetManagedResourceCommandOutput extends MetadataBearer {
  arn?: string;
  name?: string;
  /** AZ ID → 1 (serving) or 0 (shifted away): the AZs the resource is deployed in. */
  appliedWeights: Record<string, number>;
  zonalShifts: ZonalShiftInResource[];
}

export type ServiceInputTypes =
  | StartZonalShiftCommandInput
  | UpdateZonalShiftCommandInput
  | CancelZonalShiftCommandInput
  | ListZonalShiftsCommandInput
  | GetManagedResourceCommandInput;
export type ServiceOutputTypes =
  | StartZonalShiftCommandOutput
  | UpdateZonalShiftCommandOutput
  | CancelZonalShiftCommandOutput
  | ListZonalShiftsCommandOutput
  | GetManagedResourceCommandOutput;

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

/** Percent-encoding as SigV4 canonicalizes it (RFC 3986 unreserved characters kept). */
function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function resolveConfig(c: ARCZonalShiftClientConfig): ARCZonalShiftClientResolvedConfig {
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

interface RestRequest {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | undefined>;
  body?: Record<string, unknown>;
}

type Json = Record<string, unknown>;

const date = (v: unknown): Date => new Date(typeof v === "number" ? v * 1000 : String(v));
const text = (v: unknown): string => (typeof v === "string" ? v : "");

function zonalShift(j: Json): ZonalShift {
  return {
    zonalShiftId: text(j.zonalShiftId),
    resourceIdentifier: text(j.resourceIdentifier),
    awayFrom: text(j.awayFrom),
    expiryTime: date(j.expiryTime),
    startTime: date(j.startTime),
    status: text(j.status) as ZonalShiftStatus,
    comment: text(j.comment),
  };
}

function optional(j: Json): { shiftType?: string; practiceRunOutcome?: string } {
  return {
    ...(typeof j.shiftType === "string" ? { shiftType: j.shiftType } : {}),
    ...(typeof j.practiceRunOutcome === "string" ? { practiceRunOutcome: j.practiceRunOutcome } : {}),
  };
}

const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter((x): x is Json => typeof x === "object" && x !== null) : []);

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

async function invoke(config: ARCZonalShiftClientResolvedConfig, r: RestRequest): Promise<{ body: Json; $metadata: ResponseMetadata; response: RawHttpResponse }> {
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

/** One operation: how to build its request and read its answer. */
abstract class ArcCommand<I extends ServiceInputTypes, O extends ServiceOutputTypes> extends Command<I, O, ARCZonalShiftClientResolvedConfig, ServiceInputTypes, ServiceOutputTypes> {
  constructor(readonly input: I) {
    super();
  }

  protected abstract request(): RestRequest;
  protected abstract output(body: Json, $metadata: ResponseMetadata): O;

  resolveMiddleware(_stack: MiddlewareStack<ServiceInputTypes, ServiceOutputTypes>, config: ARCZonalShiftClientResolvedConfig): Handler<I, O> {
    return async () => {
      const { body, $metadata, response } = await invoke(config, this.request());
      return { output: this.output(body, $metadata), response };
    };
  }
}

export class StartZonalShiftCommand extends ArcCommand<StartZonalShiftCommandInput, StartZonalShiftCommandOutput> {
  protected request(): RestRequest {
    const { resourceIdentifier, awayFrom, expiresIn, comment } = this.input;
    return { method: "POST", path: "/zonalshifts", body: { resourceIdentifier, awayFrom, expiresIn, comment } };
  }
  protected output(body: Json, $metadata: ResponseMetadata): StartZonalShiftCommandOutput {
    return { ...zonalShift(body), $metadata };
  }
}

export class UpdateZonalShiftCommand extends ArcCommand<UpdateZonalShiftCommandInput, UpdateZonalShiftCommandOutput> {
  protected request(): RestRequest {
    const { zonalShiftId, expiresIn, comment } = this.input;
    return { method: "PATCH", path: `/zonalshifts/${rfc3986(zonalShiftId)}`, body: { ...(expiresIn ? { expiresIn } : {}), ...(comment !== undefined ? { comment } : {}) } };
  }
  protected output(body: Json, $metadata: ResponseMetadata): UpdateZonalShiftCommandOutput {
    return { ...zonalShift(body), $metadata };
  }
}

export class CancelZonalShiftCommand extends ArcCommand<CancelZonalShiftCommandInput, CancelZonalShiftCommandOutput> {
  protected request(): RestRequest {
    return { method: "DELETE", path: `/zonalshifts/${rfc3986(this.input.zonalShiftId)}` };
  }
  protected output(body: Json, $metadata: ResponseMetadata): CancelZonalShiftCommandOutput {
    return { ...zonalShift(body), $metadata };
  }
}

export class ListZonalShiftsCommand extends ArcCommand<ListZonalShiftsCommandInput, ListZonalShiftsCommandOutput> {
  protected request(): RestRequest {
    const { resourceIdentifier, status, nextToken, maxResults } = this.input;
    return { method: "GET", path: "/zonalshifts", query: { resourceIdentifier, status, nextToken, maxResults: maxResults === undefined ? undefined : String(maxResults) } };
  }
  protected output(body: Json, $metadata: ResponseMetadata): ListZonalShiftsCommandOutput {
    return {
      items: list(body.items).map((j) => ({ ...zonalShift(j), ...optional(j) })),
      ...(typeof body.nextToken === "string" ? { nextToken: body.nextToken } : {}),
      $metadata,
    };
  }
}

export class GetManagedResourceCommand extends ArcCommand<GetManagedResourceCommandInput, GetManagedResourceCommandOutput> {
  protected request(): RestRequest {
    return { method: "GET", path: `/managedresources/${rfc3986(this.input.resourceIdentifier)}` };
  }
  protected output(body: Json, $metadata: ResponseMetadata): GetManagedResourceCommandOutput {
    const weights: Record<string, number> = {};
    const raw = typeof body.appliedWeights === "object" && body.appliedWeights !== null ? (body.appliedWeights as Json) : {};
    for (const [az, w] of Object.entries(raw)) if (typeof w === "number") weights[az] = w;
    return {
      ...(typeof body.arn === "string" ? { arn: body.arn } : {}),
      ...(typeof body.name === "string" ? { name: body.name } : {}),
      appliedWeights: weights,
      zonalShifts: list(body.zonalShifts).map((j) => ({
        zonalShiftId: text(j.zonalShiftId),
        resourceIdentifier: text(j.resourceIdentifier),
        awayFrom: text(j.awayFrom),
        expiryTime: date(j.expiryTime),
        startTime: date(j.startTime),
        comment: text(j.comment),
        appliedStatus: text(j.appliedStatus),
        ...optional(j),
      })),
      $metadata,
    };
  }
}

export class ARCZonalShiftClient extends Client<object, ServiceInputTypes, ServiceOutputTypes, ARCZonalShiftClientResolvedConfig> {
  constructor(config: ARCZonalShiftClientConfig = {}) {
    super(resolveConfig(config));
  }

  override destroy(): void {
    this.config.requestHandler.destroy?.();
  }
}
