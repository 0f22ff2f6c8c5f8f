/**
 * Runs the Pulumi program in infra/ offline under Pulumi's mock monitor with one
 * environment's stack file, and returns every resource it registered. Shared by the
 * infra tests and the policy pack's tests (policies run over the captured resources).
 */
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { verifiedArchivePath } from "../contracts/charts";
import { archiveName, type PinnedChart } from "./chart-archive";
import type { StackDeps } from "./stack";
import { readStackFile } from "./stack-yaml";
import { withStandIns } from "./user-settings";

/** A stack file that cannot be read or parsed (named, with the line); the offline tools exit 2 on it. */
export { StackYamlError } from "./stack-yaml";

export type Env = "dev" | "staging" | "prod" | "byo";

/** One resource as the engine would have received it. */
export interface CapturedResource {
  /** Pulumi type token, e.g. `aws:eks/nodeGroup:NodeGroup`, `kubernetes:apps/v1:Deployment`. */
  type: string;
  /** Logical name. */
  name: string;
  urn: string;
  /** The inputs the program passed, resolved to plain values (Kubernetes: `{apiVersion, kind, metadata, spec}`). */
  props: Record<string, unknown>;
  /** Resource options the engine saw, which the mock's `newResource` does not get. */
  opts: {
    parent?: string;
    ignoreChanges: string[];
    /** Direct dependencies: explicit `dependsOn` and every input that is another resource's Output (what the engine orders creates by). */
    dependsOn: string[];
    /** The same per input property (`aliases`, `roleArn`, …). */
    propertyDependencies: Record<string, string[]>;
    customTimeouts?: { create?: string; update?: string; delete?: string };
    /** Names (or URNs) the resource was known by before (`aliases`): the engine takes it as the same resource. */
    aliases?: string[];
  };
}

export const PROJECT = "llm-ha";
const ROOT = path.resolve(__dirname, "..");
/** Stands in for `pulumi config set --secret llm-ha:redisAuthToken`, which no stack file can carry in clear (infra/user-settings.ts). */
export const TEST_REDIS_TOKEN = "test-token-0123456789abcdef";

/** The stack file's `config:` as the CLI hands it to the program: strings, structured values as JSON. */
export function stackConfig(env: Env): Record<string, string> {
  return readStackFile(stackFile(env));
}

/** The repository's stack file of `env`. */
export function stackFile(env: Env): string {
  return path.join(ROOT, `Pulumi.${env}.yaml`);
}

/** What the mocked invokes answer (AZ names map to ids differently in every account). */
const INVOKES: Record<string, Record<string, unknown>> = {
  "aws:index/getCallerIdentity:getCallerIdentity": { accountId: "123456789012", arn: "arn:aws:iam::123456789012:root", userId: "x" },
  "aws:ecr/getAuthorizationToken:getAuthorizationToken": { userName: "AWS", password: "ecr-token", proxyEndpoint: "https://123456789012.dkr.ecr.us-east-1.amazonaws.com" },
  "aws:index/getAvailabilityZones:getAvailabilityZones": {
    names: ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"],
    zoneIds: ["use1-az4", "use1-az6", "use1-az1", "use1-az2"],
  },
};

/** One data-source call the program made (`aws.eks.getAddonVersion`, …), with its arguments. */
export interface CapturedInvoke {
  token: string;
  args: Record<string, unknown>;
}

/**
 * The mock's answer to `aws.eks.getAddonVersion`: a version that names what it was resolved
 * for, so a test can tell a resolved version from a pinned one and see the cluster version
 * it was asked for (EKS answers real `v1.x.y-eksbuild.N` strings).
 */
export function mockAddonVersion(addonName: string, kubernetesVersion: string): string {
  return `v${kubernetesVersion}.0-eksbuild.resolved-${addonName}`;
}

/**
 * The existing cluster of a byo stack (`llm-ha:existingCluster`), as the mocks describe it: a
 * cluster in `vpc-0b10c0ffee0000001` (10.50.0.0/16) with its issuer, one private and one public
 * subnet per AZ (ids name the AZ's letter and role), and node groups with an auto scaling group.
 */
export const MOCK_EXISTING = Object.freeze({
  vpcId: "vpc-0b10c0ffee0000001",
  vpcCidr: "10.50.0.0/16",
  issuer: (name: string) => `https://oidc.eks.us-east-1.amazonaws.com/id/EXISTING${name.toUpperCase().replace(/[^A-Z0-9]/g, "")}`,
  subnet: (az: string, role: "private" | "public") => `subnet-0${role === "private" ? "a" : "b"}${az.slice(-1).charCodeAt(0).toString(16)}00000000000`,
});

function filterValue(args: Record<string, unknown>, name: string): string | undefined {
  const f = (args.filters as { name: string; values: string[] }[] | undefined)?.find((x) => x.name === name);
  return f?.values[0];
}

function existingClusterInvoke(token: string, args: Record<string, unknown>): Record<string, unknown> | undefined {
  switch (token) {
    case "aws:eks/getCluster:getCluster": {
      const name = String(args.name);
      return {
        name, id: name, arn: `arn:aws:eks:us-east-1:123456789012:cluster/${name}`, endpoint: `https://${name}.existing.eks.example`, version: "1.35",
        certificateAuthorities: [{ data: "Y2VydA==" }],
        identities: [{ oidcs: [{ issuer: MOCK_EXISTING.issuer(name) }] }],
        vpcConfig: { vpcId: MOCK_EXISTING.vpcId, clusterSecurityGroupId: `sg-0c1${"0".repeat(14)}`, subnetIds: [], securityGroupIds: [] },
      };
    }
    case "aws:iam/getOpenIdConnectProvider:getOpenIdConnectProvider":
      return { arn: `arn:aws:iam::123456789012:oidc-provider/${String(args.url).replace(/^https:\/\//, "")}`, url: String(args.url).replace(/^https:\/\//, ""), clientIdLists: ["sts.amazonaws.com"] };
    case "aws:ec2/getVpc:getVpc":
      return { id: args.id, cidrBlock: MOCK_EXISTING.vpcCidr };
    case "aws:ec2/getSubnets:getSubnets": {
      const az = filterValue(args, "availability-zone") ?? "";
      const role = filterValue(args, "tag:kubernetes.io/role/elb") !== undefined ? "public" : "private";
      return { ids: [MOCK_EXISTING.subnet(az, role)] };
    }
    case "aws:ec2/getSubnet:getSubnet": {
      const id = String(args.id);
      const third = parseInt(id.slice(9, 11), 16) - 0x61;
      return { id, cidrBlock: `10.50.${240 + third}.0/24` };
    }
    case "aws:eks/getNodeGroup:getNodeGroup":
      return { nodeGroupName: args.nodeGroupName, resources: [{ autoscalingGroups: [{ name: `eks-${String(args.nodeGroupName)}-asg` }] }], scalingConfigs: [{ desiredSize: 1, maxSize: 2, minSize: 0 }], labels: {} };
    default:
      return undefined;
  }
}

/**
 * An adopted data tier (`llm-ha:redis.existing`, `llm-ha:kafka.existing`) as the mocks describe
 * it: a replication group with TLS required, failover and Multi-AZ on, cluster mode off, and its
 * primary at `master.<id>.<hash>.use1.cache.amazonaws.com:6379`; an MSK cluster whose SASL/IAM
 * brokers are `b-<n>.<name>.<hash>.c2.kafka.us-east-1.amazonaws.com:9098`, one per AZ.
 */
export const MOCK_ADOPTED = Object.freeze({
  primaryEndpoint: (replicationGroupId: string) => `master.${replicationGroupId}.x1y2z3.use1.cache.amazonaws.com`,
  bootstrapBrokers: (clusterArn: string) => {
    const name = /:cluster\/([^/]+)\//.exec(clusterArn)?.[1] ?? "msk";
    return [1, 2, 3].map((n) => `b-${n}.${name}.a1b2c3.c2.kafka.us-east-1.amazonaws.com:9098`).join(",");
  },
});

function adoptedDataInvoke(token: string, args: Record<string, unknown>): Record<string, unknown> | undefined {
  switch (token) {
    case "aws:elasticache/getReplicationGroup:getReplicationGroup": {
      const id = String(args.replicationGroupId);
      return {
        id, replicationGroupId: id, arn: `arn:aws:elasticache:us-east-1:123456789012:replicationgroup:${id}`, description: "adopted",
        primaryEndpointAddress: MOCK_ADOPTED.primaryEndpoint(id), readerEndpointAddress: MOCK_ADOPTED.primaryEndpoint(id).replace(/^master\./, "replica."), port: 6379,
        automaticFailoverEnabled: true, multiAzEnabled: true, clusterMode: "disabled", numCacheClusters: 3, numNodeGroups: 1, replicasPerNodeGroup: 2,
        authTokenEnabled: false, transitEncryptionEnabled: true, transitEncryptionMode: "required", atRestEncryptionEnabled: true,
        memberClusters: [1, 2, 3].map((n) => `${id}-00${n}`), nodeType: "cache.r7g.large", engine: "redis", engineVersion: "7.1",
      };
    }
    case "aws:msk/getBootstrapBrokers:getBootstrapBrokers": {
      const arn = String(args.clusterArn);
      return { id: arn, clusterArn: arn, bootstrapBrokersSaslIam: MOCK_ADOPTED.bootstrapBrokers(arn), bootstrapBrokersTls: MOCK_ADOPTED.bootstrapBrokers(arn).replace(/:9098/g, ":9094") };
    }
    default:
      return undefined;
  }
}

function invoke(token: string, args: Record<string, unknown>): Record<string, unknown> {
  const existing = existingClusterInvoke(token, args) ?? adoptedDataInvoke(token, args);
  if (existing !== undefined) return existing;
  if (token === "aws:eks/getAddonVersion:getAddonVersion") {
    return { ...args, id: String(args.addonName), version: mockAddonVersion(String(args.addonName), String(args.kubernetesVersion)) };
  }
  return INVOKES[token] ?? {};
}

/** Outputs a real provider computes; the mock makes them up so dependent inputs resolve. */
function fakeOutputs(type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> {
  const arn = `arn:aws:${type.split(":")[1]?.split("/")[0] ?? "x"}:us-east-1:123456789012:${name}`;
  const base: Record<string, unknown> = { ...inputs, arn, name: inputs.name ?? name };
  switch (type) {
    case "aws:eks/cluster:Cluster": {
      const vpcConfig = (inputs.vpcConfig ?? {}) as Record<string, unknown>;
      return {
        ...base,
        endpoint: `https://${name}.eks.example`,
        certificateAuthority: { data: "Y2VydA==" },
        identities: [{ oidcs: [{ issuer: `https://oidc.eks.us-east-1.amazonaws.com/id/${name}` }] }],
        vpcConfig: { ...vpcConfig, clusterSecurityGroupId: `sg-${name}` },
      };
    }
    case "aws:eks/nodeGroup:NodeGroup":
      return { ...base, nodeGroupName: name, resources: [{ autoscalingGroups: [{ name: `eks-${name}-asg` }] }] };
    case "aws:ecr/repository:Repository":
      return { ...base, registryId: "123456789012", repositoryUrl: `123456789012.dkr.ecr.us-east-1.amazonaws.com/${String(inputs.name ?? name)}` };
    case "docker-build:index:Image":
      return { ...inputs, digest: `sha256:${"d1".repeat(32)}`, ref: `${String((inputs.tags as string[] | undefined)?.[0] ?? name)}@sha256:${"d1".repeat(32)}` };
    case "aws:msk/configuration:Configuration":
      return { ...base, latestRevision: 1 };
    case "aws:ec2/launchTemplate:LaunchTemplate":
      return { ...base, latestVersion: 1 };
    case "aws:elasticache/replicationGroup:ReplicationGroup":
      return { ...base, primaryEndpointAddress: `master.${name}.cache.amazonaws.com`, readerEndpointAddress: `replica.${name}.cache.amazonaws.com` };
    case "aws:msk/cluster:Cluster":
      return { ...base, arn: `arn:aws:kafka:us-east-1:123456789012:cluster/${name}/0a1b2c3d-4e5f-6789-abcd-ef0123456789-1`, bootstrapBrokersSaslIam: `b-1.${name}.kafka.amazonaws.com:9098,b-2.${name}.kafka.amazonaws.com:9098` };
    case "kubernetes:core/v1:Service": {
      const spec = (inputs.spec ?? {}) as Record<string, unknown>;
      if (spec.type !== "LoadBalancer") return inputs;
      const meta = (inputs.metadata ?? {}) as Record<string, unknown>;
      return { ...inputs, status: { loadBalancer: { ingress: [{ hostname: `${String(meta.name ?? name)}-0123.elb.us-east-1.amazonaws.com` }] } } };
    }
    default:
      return type.startsWith("kubernetes:") ? inputs : base;
  }
}

/** Where the offline runs say a verified chart archive lies: no such folder exists, nothing is read from it. */
export const OFFLINE_CHART_ROOT = "/offline-stand-in/llm-ha/helm-charts";

/**
 * The chart archive of an offline run: the path a real run hands Helm (the cache layout, named
 * by the pinned digest), without downloading or reading anything: the mocks install nothing, and
 * tests and `npm run policy` run without network. The check itself is tested on its own
 * (test/infra/chart-archive.test.ts).
 */
async function offlineChartArchive(chart: PinnedChart): Promise<string> {
  return verifiedArchivePath(OFFLINE_CHART_ROOT, chart.digest, archiveName(chart));
}

/** Secrets arrive wrapped in the RPC signature; policies and tests want the plain values. */
export function unwrapSecrets(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(unwrapSecrets);
  if (typeof v !== "object" || v === null) return v;
  const o = v as Record<string, unknown>;
  if (o[pulumi.runtime.specialSigKey] === pulumi.runtime.specialSecretSig) return unwrapSecrets(o.value);
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, unwrapSecrets(x)]));
}

interface RegisterRequest {
  getType(): string;
  getName(): string;
  getParent(): string;
  getIgnorechangesList(): string[];
  getDependenciesList(): string[];
  getPropertydependenciesMap(): { forEach(f: (v: { getUrnsList(): string[] }, k: string) => void): void };
  getCustomtimeouts(): { getCreate(): string; getUpdate(): string; getDelete(): string } | undefined;
  getAliasesList(): { getUrn(): string; getSpec(): { getName(): string } | undefined }[];
}

interface MonitorLike {
  resources: Map<string, { urn: string }>;
  registerResource(req: RegisterRequest, callback: unknown): Promise<void>;
}

/**
 * Runs the program for `env` (its `Pulumi.<env>.yaml`, with `configOverrides` on top:
 * full keys such as `llm-ha:standbyAz`; an empty string removes a key) and returns every
 * resource registered. Rejects with the program's error, e.g. `InputPropertiesError`.
 */
/**
 * Every resource the program registers for one stack. `file` reads the config from another
 * `Pulumi.<stack>.yaml` than the repository's one of `env` (the policy CLI's `--stack PATH`).
 */
export async function captureStack(env: Env | string, configOverrides: Record<string, string> = {}, file?: string): Promise<CapturedResource[]> {
  return (await captureStackGraph(env, configOverrides, file)).resources;
}

/** A data source's answer by token, in place of the mock's (`aws:eks/getNodeGroups:getNodeGroups`: the groups a stack already runs). */
export type InvokeAnswers = Record<string, (args: Record<string, unknown>) => Record<string, unknown>>;

/**
 * `captureStack`, with the data-source calls the program made; `deps` replace what the program
 * reaches outside the mocks, `answers` what its data sources read (an account where the stack
 * already runs, for a second `pulumi up`).
 */
export async function captureStackGraph(
  env: Env | string,
  configOverrides: Record<string, string> = {},
  file?: string,
  deps: StackDeps = { chartArchive: offlineChartArchive },
  answers: InvokeAnswers = {},
): Promise<{ resources: CapturedResource[]; invokes: CapturedInvoke[] }> {
  // Read before the mocks are set: a bad file stops here, naming itself.
  const fileConfig = file === undefined ? stackConfig(env as Env) : readStackFile(file);
  // Pulumi stamps `new Error().stack` on every promise it makes, for a leak report a capture
  // never prints; where source maps are on (tsx, vitest) each stack is then mapped frame by
  // frame: about 60 % of a capture's time (a prod capture 1.2 s with stacks, 0.4 s without).
  // The program runs with no stack taken; an error it throws still carries its message.
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    const seen: { type: string; name: string; props: Record<string, unknown> }[] = [];
    const invokes: CapturedInvoke[] = [];
    await pulumi.runtime.setMocks(
      {
        newResource: (a) => {
          const props = unwrapSecrets(a.inputs ?? {}) as Record<string, unknown>;
          seen.push({ type: a.type, name: a.name, props });
          return { id: `${a.name}-id`, state: fakeOutputs(a.type, a.name, (a.inputs ?? {}) as Record<string, unknown>) };
        },
        call: (a) => {
          const args = unwrapSecrets(a.inputs ?? {}) as Record<string, unknown>;
          invokes.push({ token: a.token, args });
          return answers[a.token]?.(args) ?? invoke(a.token, args);
        },
      },
      PROJECT,
      env,
      false,
    );
    const monitor = pulumi.runtime.getMonitor() as unknown as MonitorLike;
    const options = new Map<string, CapturedResource["opts"]>();
    const register = monitor.registerResource.bind(monitor);
    monitor.registerResource = (req, callback) => {
      const t = req.getCustomtimeouts();
      const aliases = req.getAliasesList().map((a) => a.getSpec()?.getName() || a.getUrn());
      const propertyDependencies: Record<string, string[]> = {};
      req.getPropertydependenciesMap().forEach((v, k) => {
        if (v.getUrnsList().length) propertyDependencies[k] = v.getUrnsList();
      });
      options.set(`${req.getType()}::${req.getName()}`, {
        parent: req.getParent() || undefined,
        ignoreChanges: req.getIgnorechangesList(),
        dependsOn: req.getDependenciesList(),
        propertyDependencies,
        ...(aliases.length ? { aliases } : {}),
        ...(t && (t.getCreate() || t.getUpdate() || t.getDelete())
          ? { customTimeouts: { create: t.getCreate() || undefined, update: t.getUpdate() || undefined, delete: t.getDelete() || undefined } }
          : {}),
      });
      return register(req, callback);
    };
    const { config, secretKeys } = offlineConfig(env, fileConfig, configOverrides);
    pulumi.runtime.setAllConfig(config, secretKeys.filter((k) => !k.includes(".")));

    // Imported after setMocks, as the runtime requires; stack.ts has no top-level effects.
    const { createStack } = await import("./stack.js");
    const outputs = await createStack(deps);
    // Resolve every output and drain every registration before reading the capture.
    await Promise.all(Object.values(outputs as unknown as Record<string, pulumi.Output<unknown>>).map((o) => new Promise((resolve) => o.apply(resolve))));
    await pulumi.runtime.disconnect();

    const urns = [...monitor.resources.keys()];
    const resources = seen.map((r) => {
      const urn = urns.find((u) => {
        const [, , qualifiedType, name] = u.split("::");
        return name === r.name && qualifiedType.split("$").pop() === r.type;
      });
      if (urn === undefined) throw new Error(`no URN registered for ${r.type} ${r.name}`);
      return { ...r, urn, opts: options.get(`${r.type}::${r.name}`) ?? { ignoreChanges: [], dependsOn: [], propertyDependencies: {} } };
    });
    return { resources, invokes };
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
}

/**
 * The config an offline run hands the program: the stack file's, the overrides over it, and
 * stand-ins for the settings only a user can give (zone, name, API access, image, tokens),
 * which the stack files leave out — unless an override removes one on purpose (""). `filled`
 * names the stand-ins, for a tool that must say its verdict was reached on them.
 */
export function offlineConfig(env: string, fileConfig: Record<string, string>, configOverrides: Record<string, string> = {}): { config: Record<string, string>; secretKeys: string[]; filled: string[] } {
  const merged: Record<string, string> = { ...fileConfig, ...configOverrides };
  const removed = Object.keys(merged).filter((k) => merged[k] === "");
  for (const k of removed) delete merged[k];
  const { values: config, secretKeys, filled } = withStandIns(merged, env);
  for (const k of removed) delete config[k];
  return { config, secretKeys, filled: filled.filter((k) => !removed.includes(k)) };
}

/** The user settings the offline run of one stack fills with stand-ins (see `offlineConfig`). */
export function stackStandIns(env: Env | string, file?: string): string[] {
  return offlineConfig(env, file === undefined ? stackConfig(env as Env) : readStackFile(file)).filled;
}

/** Resources of one type. */
export function ofType(resources: CapturedResource[], type: string): CapturedResource[] {
  return resources.filter((r) => r.type === type);
}
