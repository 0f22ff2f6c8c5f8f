// The pack as the Pulumi CLI runs it: `policies/` started by @pulumi/pulumi's own
// run-policy-pack (ts-node, PulumiPolicy.yaml's directory, `policies/index.ts`), driven over
// the analyzer gRPC protocol the CLI speaks. The offline runner must report exactly what
// the analyzer reports for the same resources; that is what lets `npm test` stand in for
// `pulumi preview --policy-pack policies`.
import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import * as path from "node:path";
import * as analyzerGrpc from "@pulumi/pulumi/proto/analyzer_grpc_pb";
import * as analyzerPb from "@pulumi/pulumi/proto/analyzer_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { durationSeconds, resolvePolicyConfig, runPolicies, type CapturedResource } from "../../policies/runner";
import { captureStack } from "../../infra/capture";
import { at, find, happyStack } from "./fixtures";

// grpc-js and google-protobuf are @pulumi/pulumi's own dependencies: load the copies its
// generated stubs use, so credentials and messages are the instances they expect.
const pulumiRequire = createRequire(require.resolve("@pulumi/pulumi/package.json"));
const grpc = pulumiRequire("@grpc/grpc-js") as typeof import("@grpc/grpc-js");
const { Struct } = pulumiRequire("google-protobuf/google/protobuf/struct_pb.js") as typeof import("google-protobuf/google/protobuf/struct_pb");
const { Empty } = pulumiRequire("google-protobuf/google/protobuf/empty_pb.js") as typeof import("google-protobuf/google/protobuf/empty_pb");

const ROOT = path.resolve(__dirname, "..", "..");
const LEVELS = ["advisory", "mandatory", "disabled", "remediate"] as const;

interface Finding {
  policy: string;
  level: string;
  urn: string;
  message: string;
}

let pack: ChildProcess | undefined;
let client: analyzerGrpc.AnalyzerClient;

function startPack(): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, "node_modules/@pulumi/pulumi/cmd/run-policy-pack"), "127.0.0.1:0", "."], {
      cwd: path.join(ROOT, "policies"),
      stdio: ["ignore", "pipe", "pipe"],
    });
    pack = child;
    let out = "";
    let err = "";
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /^(\d+)\s*$/m.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
    child.on("exit", (code) => reject(new Error(`policy pack exited ${code}: ${err}`)));
  });
}

function call<Req, Res>(fn: (req: Req, cb: (e: Error | null, r: Res) => void) => unknown, req: Req): Promise<Res> {
  return new Promise((resolve, reject) => fn.call(client, req, (e, r) => (e ? reject(e) : resolve(r))));
}

/** The resource's options as the engine sends them: custom timeouts in seconds, ignoreChanges as the program gave them. */
function options(r: CapturedResource): analyzerPb.AnalyzerResourceOptions {
  const o = new analyzerPb.AnalyzerResourceOptions().setProtect(false).setIgnorechangesList(r.opts?.ignoreChanges ?? []);
  const t = r.opts?.customTimeouts;
  if (t) {
    o.setCustomtimeouts(
      new analyzerPb.AnalyzerResourceOptions.CustomTimeouts().setCreate(durationSeconds(t.create)).setUpdate(durationSeconds(t.update)).setDelete(durationSeconds(t.delete)),
    );
  }
  return o;
}

/** A resource for AnalyzeStack with the dependencies the engine records (what infra/capture.ts read off the register request). */
function stackResource(r: CapturedResource): analyzerPb.AnalyzerResource {
  const res = new analyzerPb.AnalyzerResource()
    .setType(r.type)
    .setName(r.name)
    .setUrn(r.urn)
    .setProperties(Struct.fromJavaScript(r.props as Record<string, never>))
    .setOptions(options(r))
    .setDependenciesList(r.opts?.dependsOn ?? []);
  for (const [k, urns] of Object.entries(r.opts?.propertyDependencies ?? {})) {
    res.getPropertydependenciesMap().set(k, new analyzerPb.AnalyzerPropertyDependencies().setUrnsList(urns));
  }
  return res;
}

function findings(res: analyzerPb.AnalyzeResponse, fallbackUrn: string): Finding[] {
  return res.getDiagnosticsList().map((d) => ({
    policy: d.getPolicyname(),
    level: LEVELS[d.getEnforcementlevel()],
    urn: d.getUrn() || fallbackUrn,
    message: d.getMessage(),
  }));
}

/** Every resource through Analyze, then all of them through AnalyzeStack, as the CLI does. */
async function analyze(resources: CapturedResource[]): Promise<Finding[]> {
  const out: Finding[] = [];
  for (const r of resources) {
    const req = new analyzerPb.AnalyzeRequest()
      .setType(r.type)
      .setName(r.name)
      .setUrn(r.urn)
      .setProperties(Struct.fromJavaScript(r.props as Record<string, never>))
      .setOptions(options(r));
    out.push(...findings(await call(client.analyze, req), r.urn));
  }
  const stackReq = new analyzerPb.AnalyzeStackRequest().setResourcesList(resources.map(stackResource));
  out.push(...findings(await call(client.analyzeStack, stackReq), ""));
  return out;
}

/** The runner's violations in the analyzer's terms (it prefixes the description). */
async function offline(resources: CapturedResource[]): Promise<Finding[]> {
  const byName = new Map(policies.map((p) => [p.name, p.description]));
  return (await runPolicies(policies, resources)).map((v) => ({
    policy: v.policy,
    level: v.enforcementLevel,
    urn: v.urn ?? "",
    message: `${byName.get(v.policy)}\n${v.message}`,
  }));
}

const sorted = (f: Finding[]) => [...f].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe("the pack under Pulumi's policy-pack host", () => {
  beforeAll(async () => {
    const port = await startPack();
    client = new analyzerGrpc.AnalyzerClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    // What the CLI sends before analyzing: every policy's schema defaults and level.
    const req = new analyzerPb.ConfigureAnalyzerRequest();
    for (const p of policies) {
      const cfg = new analyzerPb.PolicyConfig()
        .setEnforcementlevel(LEVELS.indexOf(p.enforcementLevel ?? "mandatory"))
        .setProperties(Struct.fromJavaScript(resolvePolicyConfig(p.name, p.configSchema, undefined) as Record<string, never>));
      req.getPolicyconfigMap().set(p.name, cfg);
    }
    await call(client.configure, req);
  }, 120_000);

  afterAll(() => {
    client?.close();
    pack?.kill();
  });

  it("serves the policies of policies/all.ts with their levels and config schemas", async () => {
    const info = await call<InstanceType<typeof Empty>, analyzerPb.AnalyzerInfo>(client.getAnalyzerInfo, new Empty());
    expect(info.getName()).toBe("llm-ha");
    expect(info.getPoliciesList().map((p) => [p.getName(), LEVELS[p.getEnforcementlevel()]])).toEqual(
      policies.map((p) => [p.name, p.enforcementLevel]),
    );
    const ttl = info.getPoliciesList().find((p) => p.getName() === "failover-record-ttl");
    expect(ttl?.getConfigschema()?.getProperties()?.toJavaScript()).toMatchObject({ maxTtl: { type: "integer", default: 30 } });
  });

  it("finds nothing in the valid stack, like the offline runner", async () => {
    const rs = happyStack();
    expect(await analyze(rs)).toEqual([]);
    expect(await offline(rs)).toEqual([]);
  });

  it("reports exactly what the offline runner reports for a broken stack", async () => {
    const rs = happyStack();
    find(rs, "hc-us-east-1a").props.failureThreshold = 3;
    find(rs, "gpu-us-east-1b-h100").props.taints = [];
    find(rs, "gpu-us-east-1a-lt").props.metadataOptions = { httpTokens: "optional" };
    find(rs, "redis-sg").props.ingress = [{ protocol: "tcp", fromPort: 9400, toPort: 9401, cidrBlocks: ["0.0.0.0/0"] }];
    find(rs, "api-us-east-1a-secondary").props.type = "A";
    at(find(rs, "agent").props, "spec.template.spec").tolerations = [];
    find(rs, "registry").props.tags = {};
    const engine = await analyze(rs);
    // The agent ports open to the world break two policies: no-public-ha-ports and ha-ports-fenced.
    expect(engine.filter((f) => f.level === "mandatory")).toHaveLength(7);
    expect(sorted(await offline(rs))).toEqual(sorted(engine));
  });

  it("agrees with the offline runner over the prod stack", async () => {
    const rs = await captureStack("prod");
    const engine = await analyze(rs);
    expect(engine.filter((f) => f.level === "mandatory")).toEqual([]);
    expect(sorted(await offline(rs))).toEqual(sorted(engine));
  });
});
