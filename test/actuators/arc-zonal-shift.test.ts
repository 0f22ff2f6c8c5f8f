// The thin ARC zonal shift client over real HTTP: a server on 127.0.0.1 stands in for
// arc-zonal-shift.<region>.amazonaws.com, checks every request's SigV4 signature the way
// the service does (recomputed from what arrived on the wire), and answers as the REST-JSON
// API does, errors included. This file must not import ./fakes (it stubs the client's send).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Sha256 } from "@aws-crypto/sha256-js";
import { HttpRequest } from "@smithy/protocol-http";
import { SignatureV4 } from "@smithy/signature-v4";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  ARCZonalShiftClient,
  ARCZonalShiftServiceException,
  CancelZonalShiftCommand,
  GetManagedResourceCommand,
  ListZonalShiftsCommand,
  StartZonalShiftCommand,
  UpdateZonalShiftCommand,
} from "../../agent/src/fleet/actuators/arc-zonal-shift";
import { AwsActuator } from "../../agent/src/fleet/actuators/aws";
import { withRetry } from "../../agent/src/fleet/actuators/retry";
import { testLogger } from "../redis/helpers";

const REGION = "us-east-1";
const CREDS = { accessKeyId: "AKIDLOOPBACK", secretAccessKey: "loopback-secret", sessionToken: "irsa-session-token" };
const NLB = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/l1-us-east-1a/0123456789abcdef";
const SHIFT = { zonalShiftId: "91d2a4c5-aaaa-bbbb-cccc-0123456789ab", resourceIdentifier: NLB, awayFrom: "use1-az1", expiryTime: 1_795_000_000, startTime: 1_794_998_200, status: "ACTIVE", comment: "llm-ha token=7 zone down" };

interface Seen {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  body: string;
  signatureOk: boolean;
}

type Reply = { status: number; headers?: Record<string, string>; body?: unknown };

let server: Server;
let endpoint: string;
const seen: Seen[] = [];
let replies: Reply[] = [];

/** `20261130T030000Z` → Date. */
function amzDate(s: string): Date {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m) throw new Error(`bad x-amz-date ${s}`);
  return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]));
}

/** What the service does: rebuild the canonical request from the wire and sign it again. */
async function verify(req: IncomingMessage, url: URL, body: string): Promise<boolean> {
  const auth = req.headers.authorization ?? "";
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=[0-9a-f]{64}$/.exec(auth);
  if (!m || m[1] !== CREDS.accessKeyId || m[2] !== REGION || m[3] !== "arc-zonal-shift") return false;
  const headers: Record<string, string> = {};
  for (const h of m[4].split(";")) headers[h] = String(req.headers[h] ?? "");
  const query: Record<string, string> = {};
  url.searchParams.forEach((v, k) => (query[k] = v));
  const rebuilt = new HttpRequest({ method: req.method, protocol: "http:", hostname: url.hostname, port: Number(url.port), path: url.pathname, query, headers, body: body || undefined });
  const signer = new SignatureV4({ service: "arc-zonal-shift", region: REGION, credentials: CREDS, sha256: Sha256, uriEscapePath: true });
  const again = await signer.sign(rebuilt, { signingDate: amzDate(String(req.headers["x-amz-date"])) });
  return again.headers.authorization === auth;
}

function handler(req: IncomingMessage, res: ServerResponse): void {
  let body = "";
  req.on("data", (c: Buffer) => (body += c.toString("utf8")));
  req.on("end", () => {
    const url = new URL(req.url ?? "/", endpoint);
    void verify(req, url, body).then((signatureOk) => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = String(v);
      const query: Record<string, string> = {};
      url.searchParams.forEach((v, k) => (query[k] = v));
      seen.push({ method: req.method ?? "", path: url.pathname, query, headers, body, signatureOk });
      const r = replies.shift() ?? { status: 500, body: { message: "no reply queued" } };
      res.writeHead(r.status, { "content-type": "application/json", "x-amzn-requestid": `req-${seen.length}`, ...r.headers });
      res.end(r.body === undefined ? "" : JSON.stringify(r.body));
    });
  });
}

const client = () => new ARCZonalShiftClient({ region: REGION, endpoint, credentials: CREDS, maxAttempts: 1, requestTimeoutMs: 2000 });

beforeAll(async () => {
  server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  seen.length = 0;
  replies = [];
});

describe("ARCZonalShiftClient over loopback HTTP", () => {
  it("starts a shift: POST /zonalshifts with the JSON body, signed for arc-zonal-shift, dates parsed", async () => {
    replies = [{ status: 200, body: SHIFT }];
    const c = client();
    const input = { resourceIdentifier: NLB, awayFrom: "use1-az1", expiresIn: "30m", comment: "llm-ha token=7 zone down" };
    const out = await c.send(new StartZonalShiftCommand(input));
    c.destroy();
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: "POST", path: "/zonalshifts", query: {}, signatureOk: true });
    expect(JSON.parse(seen[0].body)).toEqual(input);
    expect(seen[0].headers["content-type"]).toBe("application/json");
    expect(seen[0].headers["x-amz-security-token"]).toBe(CREDS.sessionToken);
    expect(out).toMatchObject({ zonalShiftId: SHIFT.zonalShiftId, status: "ACTIVE", awayFrom: "use1-az1", $metadata: { httpStatusCode: 200, requestId: "req-1" } });
    expect(out.expiryTime).toEqual(new Date(SHIFT.expiryTime * 1000));
  });

  it("builds the update, cancel, list and managed-resource requests", async () => {
    replies = [
      { status: 200, body: SHIFT },
      { status: 200, body: { ...SHIFT, status: "CANCELED" } },
      { status: 200, body: { items: [SHIFT], nextToken: "page-2" } },
      { status: 200, body: { arn: NLB, name: "l1-us-east-1a", appliedWeights: { "use1-az1": 1 }, zonalShifts: [{ ...SHIFT, appliedStatus: "APPLIED" }] } },
    ];
    const c = client();
    await c.send(new UpdateZonalShiftCommand({ zonalShiftId: SHIFT.zonalShiftId, expiresIn: "2h", comment: "llm-ha token=8 zone down" }));
    const cancelled = await c.send(new CancelZonalShiftCommand({ zonalShiftId: SHIFT.zonalShiftId }));
    const listed = await c.send(new ListZonalShiftsCommand({ resourceIdentifier: NLB, status: "ACTIVE" }));
    const managed = await c.send(new GetManagedResourceCommand({ resourceIdentifier: NLB }));
    c.destroy();
    expect(seen.map((s) => [s.method, s.path, s.query, s.body ? JSON.parse(s.body) : null, s.signatureOk])).toEqual([
      ["PATCH", `/zonalshifts/${SHIFT.zonalShiftId}`, {}, { expiresIn: "2h", comment: "llm-ha token=8 zone down" }, true],
      ["DELETE", `/zonalshifts/${SHIFT.zonalShiftId}`, {}, null, true],
      ["GET", "/zonalshifts", { resourceIdentifier: NLB, status: "ACTIVE" }, null, true],
      ["GET", `/managedresources/${encodeURIComponent(NLB)}`, {}, null, true],
    ]);
    expect(cancelled.status).toBe("CANCELED");
    expect(listed.items?.[0]).toMatchObject({ zonalShiftId: SHIFT.zonalShiftId, comment: SHIFT.comment });
    expect(listed.nextToken).toBe("page-2");
    expect(managed.appliedWeights).toEqual({ "use1-az1": 1 });
    expect(managed.zonalShifts[0]).toMatchObject({ appliedStatus: "APPLIED", awayFrom: "use1-az1" });
  });

  it("maps REST-JSON errors to named exceptions; ThrottlingException is retried, ValidationException is not", async () => {
    replies = [
      { status: 429, headers: { "x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/" }, body: { message: "Rate exceeded" } },
      { status: 200, body: { items: [] } },
      { status: 400, headers: { "x-amzn-errortype": "ValidationException" }, body: { message: "expiresIn is invalid", reason: "InvalidExpiresIn" } },
    ];
    const c = client();
    const attempts: string[] = [];
    const onAttempt = (a: { error: unknown }) => attempts.push(a.error === null ? "ok" : (a.error as Error).name);
    const listed = await withRetry(() => c.send(new ListZonalShiftsCommand({ resourceIdentifier: NLB, status: "ACTIVE" })), { settings: { attempts: 3, baseMs: 1, maxMs: 2 }, onAttempt });
    expect(listed.items).toEqual([]);
    expect(attempts).toEqual(["ThrottlingException", "ok"]);
    attempts.length = 0;
    const err = await withRetry(() => c.send(new UpdateZonalShiftCommand({ zonalShiftId: SHIFT.zonalShiftId, expiresIn: "9d" })), { settings: { attempts: 3, baseMs: 1, maxMs: 2 }, onAttempt }).catch((e: unknown) => e);
    c.destroy();
    expect(attempts).toEqual(["ValidationException"]);
    expect(err).toBeInstanceOf(ARCZonalShiftServiceException);
    expect(err).toMatchObject({ name: "ValidationException", message: "expiresIn is invalid", $fault: "client", $metadata: { httpStatusCode: 400, requestId: "req-3" } });
  });

  it("a request signed with another secret does not verify (the check above has teeth)", async () => {
    replies = [{ status: 200, body: { items: [] } }];
    const c = new ARCZonalShiftClient({ region: REGION, endpoint, credentials: { ...CREDS, secretAccessKey: "wrong" } });
    await c.send(new ListZonalShiftsCommand({ resourceIdentifier: NLB, status: "ACTIVE" }));
    c.destroy();
    expect(seen[0].signatureOk).toBe(false);
  });

  it("signs with the default credential chain (the environment here; IRSA's web identity in the cluster)", async () => {
    const saved = { ...process.env };
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: CREDS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: CREDS.secretAccessKey,
      AWS_SESSION_TOKEN: CREDS.sessionToken,
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_CONFIG_FILE: "/nonexistent/llm-ha-test",
      AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/llm-ha-test",
    });
    try {
      replies = [{ status: 200, body: { items: [] } }];
      const c = new ARCZonalShiftClient({ region: REGION, endpoint });
      await c.send(new ListZonalShiftsCommand({ resourceIdentifier: NLB, status: "ACTIVE" }));
      c.destroy();
      expect(seen[0].signatureOk).toBe(true);
    } finally {
      process.env = saved;
    }
  });

  it("drives the AWS actuator end to end: a throttled list is retried, then the shift starts", async () => {
    replies = [
      { status: 200, body: { arn: NLB, appliedWeights: { "use1-az1": 1 }, zonalShifts: [] } },
      { status: 429, headers: { "x-amzn-errortype": "ThrottlingException" }, body: { message: "Rate exceeded" } },
      { status: 200, body: { items: [] } },
      { status: 200, body: SHIFT },
    ];
    const a = new AwsActuator({
      region: REGION,
      standbyGroups: [],
      shiftResources: [NLB],
      azIds: { "us-east-1a": "use1-az1" },
      log: testLogger(),
      arc: client(),
      retry: { attempts: 3, baseMs: 1, maxMs: 2 },
    });
    const r = await a.startZonalShift("us-east-1a", { token: 7, reason: "zone down", expiresInMs: 1_800_000 });
    await a.close();
    expect(r).toMatchObject({ outcome: "applied", calls: 4 });
    expect(r.detail).toContain("ListZonalShifts ThrottlingException→ok");
    expect(seen.map((s) => `${s.method} ${s.path}`)).toEqual([
      `GET /managedresources/${encodeURIComponent(NLB)}`,
      "GET /zonalshifts",
      "GET /zonalshifts",
      "POST /zonalshifts",
    ]);
    expect(seen.every((s) => s.signatureOk)).toBe(true);
    expect(JSON.parse(seen[3].body)).toEqual({ resourceIdentifier: NLB, awayFrom: "use1-az1", expiresIn: "30m", comment: "llm-ha token=7 zone down" });
  });
});
