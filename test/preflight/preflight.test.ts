/**
 * `llm-ha preflight --stack <env>`: offline checks of the stack file, the online checks'
 * plan, and the read-only AWS calls driven through aws-sdk-client-mock.
 */
import * as fs from "node:fs";
import { DescribeCapacityReservationsCommand, DescribeInstanceTypeOfferingsCommand, DescribeInstanceTypesCommand, EC2Client } from "@aws-sdk/client-ec2";
import { GetHostedZoneCommand, Route53Client } from "@aws-sdk/client-route-53";
import { GetServiceQuotaCommand, ServiceQuotasClient } from "@aws-sdk/client-service-quotas";
import { mockClient } from "aws-sdk-client-mock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { preflightCommand } from "../../infra/preflight/command";
import { offlineChecks } from "../../infra/preflight/checks";
import { AwsCliError, type AwsCli } from "../../infra/preflight/aws-cli";
import { reservationRow } from "../../infra/preflight/reservations";
import { stackConfig } from "../../infra/capture";
import { WORKLOAD_ROLE_NAMES } from "../../contracts/redis-roles";
import { ISSUED_CERT, PULL_THROUGH_SECRET, ROOT, SYSTEM_TYPES, variant } from "./stack-variant";
import { ROLE_PASSWORDS_HOW } from "../../infra/config/data";
import { main } from "../../lab/cli";
import { runInProcess, type Ran } from "../support/in-process";

/** `llm-ha preflight ARGS` as bin/llm-ha runs it (its entry function, in this process), with no COLUMNS of the caller's unless given. */
function cli(args: string[], env: Record<string, string> = {}): Promise<Ran> {
  return runInProcess(main, ["preflight", ...args], { cwd: ROOT, env: { COLUMNS: undefined, ...env } });
}

describe("llm-ha preflight offline", () => {
  it("prod as committed: names every user setting with its command, prints the online plan, exits 1", async () => {
    const { code, stdout } = await cli(["--stack", "prod"]);
    expect(code).toBe(1);
    const edge = ["llm-ha:inferenceApiKey", "llm-ha:edge.certificateArn", "llm-ha:images.dockerHubSecretArn", "llm-ha:images.haproxyDigest", "llm-ha:images.lbControllerDigest", "llm-ha:images.dcgmExporterDigest"];
    const weights = ["llm-ha:inference.weightsS3Uri", "llm-ha:inference.revision"];
    for (const key of ["llm-ha:redisRolePasswords", "llm-ha:dns.zoneId", "llm-ha:dns.serviceName", "llm-ha:apiEndpoint", "llm-ha:agentImage", ...weights, ...edge]) {
      expect(stdout).toMatch(new RegExp(`missing\\s+setting ${key.replace(/\./g, "\\.")}`));
    }
    // Prod loads the model from its S3 copy: the hub token is never asked for.
    expect(stdout).not.toMatch(/setting llm-ha:hfToken/);
    expect(stdout).toContain("pulumi config set --path 'llm-ha:inference.weightsS3Uri' s3://<bucket>/<prefix>");
    // A digest nobody pinned: the command that reads it, ready to paste.
    expect(stdout).toContain("crane digest public.ecr.aws/docker/library/haproxy:2.6-alpine");
    expect(stdout).toContain("aws acm request-certificate --domain-name");
    // The Docker Hub token goes in from a file, never on the command line (shell history, ps).
    expect(stdout).toContain("aws secretsmanager create-secret --name ecr-pullthroughcache/docker-hub --secret-string file://docker-hub.json");
    expect(stdout).toContain("Online checks (read-only; run with --online");
    // 4,608 for the groups at their maximum, and 768 for the standby's fallback groups.
    expect(stdout).toContain("quota-code L-417A185B (Running On-Demand P instances) in us-east-1 ≥ 5376 vCPUs");
    expect(stdout).toContain("quota-code L-1216C47A (Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances) in us-east-1 ≥ the vCPUs of system node groups (4 in each of 3 AZs) 12 × m6i.xlarge");
    expect(stdout).toContain("certificate: acm describe-certificate --certificate-arn <llm-ha:edge.certificateArn>: in us-east-1, ISSUED, its names cover <llm-ha:dns.serviceName>");
    expect(stdout).toContain("pull-through secret: secretsmanager describe-secret --secret-id <llm-ha:images.dockerHubSecretArn>: exists in us-east-1");
    expect(stdout).toContain("add-on versions: eks describe-addon-versions --kubernetes-version 1.36 for vpc-cni, coredns, kube-proxy, eks-pod-identity-agent, aws-ebs-csi-driver, eks-node-monitoring-agent: each has a default version");
    expect(stdout).toContain("agent image: ecr describe-images --image-ids imageDigest=… for <llm-ha:agentImage>: the digest exists in its repository");
    expect(stdout).toMatch(/warn\s+capacity h100\s+p5\.48xlarge On-Demand without a reservation/);
    // Nothing in the stack reads the shipped rules and dashboards unless the user's Prometheus does.
    expect(stdout).toMatch(/warn\s+observability\s+(alert rules, scrape jobs and the dashboard ship as ConfigMaps|PrometheusRule and PodMonitors need)/);
    expect(stdout).toMatch(/13 blocking \(offline checks only\)\n$/);
  });

  it("a filled-in stack file: nothing blocks offline, exit 0", async () => {
    const { code, stdout } = await cli(["--stack", variant()]);
    expect(code, stdout).toBe(0);
    expect(stdout).toMatch(/ok\s+user settings/);
    expect(stdout).toContain("route53 get-hosted-zone --id Z04217753KQ3ZPLMVTB2: exists, is public and a parent of infer.qa.llm-ha.net");
    expect(stdout).toMatch(/nothing blocks \(offline checks only\)\n$/);
  });

  it("a placeholder is invalid, named with the program's reason", () => {
    const values = { ...stackConfig("dev"), "llm-ha:dns": JSON.stringify({ zoneId: "Z0123456789DEVZONE", serviceName: "infer.dev.llm-ha.example.com" }) };
    const rows = offlineChecks(values, "llm-ha", "dev").rows;
    expect(rows.filter((r) => r.status === "invalid").map((r) => r.check)).toEqual(["setting llm-ha:dns.serviceName", "setting llm-ha:dns.zoneId"]);
  });

  it("the old Redis AUTH token alone: a warning in dev (a migration path), an invalid row in staging and prod, each with the roles' command", () => {
    for (const [stack, status] of [["dev", "warn"], ["staging", "invalid"], ["prod", "invalid"]] as const) {
      const values = { ...stackConfig(stack), "llm-ha:redisAuthToken": JSON.stringify({ secure: "v1:AAAABBBBCCCCDDDD" }) };
      const { rows, missing } = offlineChecks(values, "llm-ha", stack);
      expect(missing, stack).not.toContain("llm-ha:redisRolePasswords");
      expect(rows.find((r) => r.check === "setting llm-ha:redisRolePasswords"), stack).toMatchObject({ status, fix: ROLE_PASSWORDS_HOW });
    }
    const roles = { ...stackConfig("prod"), "llm-ha:redisRolePasswords": JSON.stringify(Object.fromEntries(WORKLOAD_ROLE_NAMES.map((r) => [r, { secure: "v1:AAAA" }]))) };
    expect(offlineChecks(roles, "llm-ha", "prod").rows.filter((r) => r.check.includes("redis"))).toEqual([]);
  });

  it("a Kubernetes version newer than the support table: a warning row, not a crash", () => {
    const values = { ...stackConfig("dev"), "llm-ha:kubernetesVersion": "1.37" };
    const row = offlineChecks(values, "llm-ha", "dev").rows.find((r) => r.check === "EKS 1.37 support");
    expect(row).toMatchObject({ status: "warn", detail: "not in the support table (contracts/eks-versions.ts): its window is not checked" });
  });

  it("fits $COLUMNS with the verdict first and each fix whole under its row; -o json is a versioned document", async () => {
    const { code, stdout } = await cli(["--stack", "prod"], { COLUMNS: "80" });
    expect(code).toBe(1);
    const lines = stdout.split("\n");
    for (const l of lines) expect([...l].length, l).toBeLessThanOrEqual(80);
    expect(lines[2]).toMatch(/^STATUS\s+CHECK\s+DETAIL$/);
    // A long fix is broken with a trailing backslash, so the pasted lines still run as one command.
    const fix = stdout.slice(stdout.indexOf("fix: for r in llmha-agent"));
    expect(fix.split("\n").slice(0, 4).join("\n").replace(/ \\\n +/g, " ")).toContain(ROLE_PASSWORDS_HOW);
    const json = await cli(["--stack", "prod", "-o", "json"]);
    expect(json.code).toBe(1);
    const doc = JSON.parse(json.stdout) as { version: number; stack: string; rows: Record<string, string>[]; blocking: number; onlinePlan: string[] };
    expect(doc).toMatchObject({ version: 1, stack: "prod", blocking: 13 });
    expect(Object.keys(doc)).toEqual(["version", "stack", "file", "online", "rows", "onlinePlan", "blocking"]);
    for (const r of doc.rows) expect(Object.keys(r)).toEqual(["check", "status", "detail", "fix"]);
    expect(doc.onlinePlan.length).toBeGreaterThan(3);
    expect((await cli(["--stack", "prod", "-o", "yaml"])).code).toBe(2);
  }, 120_000);

  it("exits 2 without --stack", async () => {
    expect((await cli([])).code).toBe(2);
  });
});

describe("llm-ha preflight --online (aws-sdk-client-mock)", () => {
  const ec2 = mockClient(EC2Client);
  const quotas = mockClient(ServiceQuotasClient);
  const route53 = mockClient(Route53Client);
  const clients = () => ({ ec2: new EC2Client({ region: "us-east-1" }), quotas: new ServiceQuotasClient({ region: "us-east-1" }), route53: new Route53Client({ region: "us-east-1" }) });
  let out: string;

  beforeEach(() => {
    out = "";
    vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
    ec2.reset();
    quotas.reset();
    route53.reset();
    quotas.on(GetServiceQuotaCommand, { ServiceCode: "ec2", QuotaCode: "L-417A185B" }).resolves({ Quota: { Value: 2000 } });
    quotas.on(GetServiceQuotaCommand, { ServiceCode: "ec2", QuotaCode: "L-1216C47A" }).resolves({ Quota: { Value: 32 } });
    ec2.on(DescribeInstanceTypesCommand).resolves(SYSTEM_TYPES);
    ec2.on(DescribeInstanceTypeOfferingsCommand).resolves({
      InstanceTypeOfferings: ["us-east-1a", "us-east-1b"].map((az) => ({ InstanceType: "p4d.24xlarge", Location: az, LocationType: "availability-zone" })),
    });
    route53.on(GetHostedZoneCommand, { Id: "Z04217753KQ3ZPLMVTB2" }).resolves({ HostedZone: { Id: "/hostedzone/Z04217753KQ3ZPLMVTB2", Name: "llm-ha.net.", CallerReference: "x", Config: { PrivateZone: false } } });
  });
  afterEach(() => vi.restoreAllMocks());

  it("all good: quota, offerings and the hosted zone pass, exit 0", async () => {
    expect(await preflightCommand(["--stack", variant(), "--online"], clients)).toBe(0);
    // p4d × 2 per AZ × 2 AZs, and the standby's p4de fallback group at 2.
    expect(out).toMatch(/ok\s+GPU quota\s+Running On-Demand P instances: 2000 vCPUs ≥ 576 needed at every group's maximum \(standby fallback groups included\)/);
    expect(out).toMatch(/ok\s+hosted zone/);
    // The system nodes at their maximum: 3 in all, split over 2 AZs rounded up (2 each), m6i.large, 2 vCPUs each.
    expect(out).toMatch(/ok\s+Standard quota\s+Running On-Demand Standard \(A, C, D, H, I, M, R, T, Z\) instances: 32 vCPUs ≥ 8 needed/);
    expect(out).toMatch(/nothing blocks\n$/);
    // The standby's p4de fallback group is asked for too; not offered here: a warning, not a block.
    expect(out).toMatch(/warn\s+fallback a100 in us-east-1b\s+none of p4de\.24xlarge is offered in us-east-1b: the standby's fallback group could never launch/);
    expect(ec2.commandCalls(DescribeInstanceTypeOfferingsCommand)[0].args[0].input.Filters).toEqual([
      { Name: "instance-type", Values: ["p4d.24xlarge", "p4de.24xlarge"] },
      { Name: "location", Values: ["us-east-1a", "us-east-1b"] },
    ]);
  });

  it("a fallback type offered in the standby AZ: no warning", async () => {
    ec2.on(DescribeInstanceTypeOfferingsCommand).resolves({
      InstanceTypeOfferings: [
        ...["us-east-1a", "us-east-1b"].map((az) => ({ InstanceType: "p4d.24xlarge" as const, Location: az, LocationType: "availability-zone" as const })),
        { InstanceType: "p4de.24xlarge" as const, Location: "us-east-1b", LocationType: "availability-zone" as const },
      ],
    });
    expect(await preflightCommand(["--stack", variant(), "--online"], clients)).toBe(0);
    expect(out).not.toMatch(/fallback a100/);
    expect(out).toMatch(/ok\s+instance types offered\s+p4d\.24xlarge, p4de\.24xlarge offered/);
  });

  it("a p5e fallback that is offered still warns: p5e is largely sold as Capacity Blocks, which the offerings cannot tell apart", async () => {
    ec2.on(DescribeInstanceTypeOfferingsCommand).resolves({
      InstanceTypeOfferings: [
        ...["us-east-1a", "us-east-1b"].map((az) => ({ InstanceType: "p4d.24xlarge" as const, Location: az, LocationType: "availability-zone" as const })),
        { InstanceType: "p5e.48xlarge" as const, Location: "us-east-1b", LocationType: "availability-zone" as const },
      ],
    });
    expect(await preflightCommand(["--stack", variant((y) => y.replace("config:\n", "config:\n  llm-ha:standbyFallback:\n    a100:\n      - p5e.48xlarge\n")), "--online"], clients)).toBe(0);
    expect(out).toMatch(/warn\s+fallback a100 in us-east-1b\s+p5e\.48xlarge is offered, but largely sold as Capacity Blocks: an On-Demand launch may find no capacity/);
  });

  it("a short quota, a type not offered, a missing zone: each a blocking row with the fix", async () => {
    quotas.on(GetServiceQuotaCommand).resolves({ Quota: { Value: 96 } });
    ec2.on(DescribeInstanceTypeOfferingsCommand).resolves({ InstanceTypeOfferings: [{ InstanceType: "p4d.24xlarge", Location: "us-east-1a" }] });
    route53.on(GetHostedZoneCommand).rejects(Object.assign(new Error("No hosted zone found with ID"), { name: "NoSuchHostedZone" }));
    expect(await preflightCommand(["--stack", variant(), "--online", "-o", "wide"], clients)).toBe(1);
    expect(out).toMatch(/missing\s+GPU quota\s+Running On-Demand P instances: 96 vCPUs in us-east-1, 576 needed.*request-service-quota-increase --service-code ec2 --quota-code L-417A185B --desired-value 576/);
    expect(out).toMatch(/missing\s+offered a100 in us-east-1b\s+none of p4d\.24xlarge is offered in us-east-1b/);
    expect(out).toMatch(/missing\s+hosted zone\s+no hosted zone Z04217753KQ3ZPLMVTB2/);
    expect(out).toMatch(/3 blocking\n$/);
  });

  it("a service name at the zone's apex is invalid: its records are CNAMEs", async () => {
    route53.on(GetHostedZoneCommand).resolves({ HostedZone: { Id: "/hostedzone/Z04217753KQ3ZPLMVTB2", Name: "infer.qa.llm-ha.net.", CallerReference: "x", Config: { PrivateZone: false } } });
    expect(await preflightCommand(["--stack", variant(), "--online"], clients)).toBe(1);
    expect(out).toMatch(/invalid\s+hosted zone\s+infer\.qa\.llm-ha\.net is the zone's apex: Route53 refuses a CNAME record there/);
  });

  it("a reservation in another AZ than configured is invalid", async () => {
    const file = variant((y) => y.replace("    - name: a100\n", "    - name: a100\n      capacityReservations:\n        us-east-1a: cr-0123456789abcdef0\n"));
    ec2.on(DescribeCapacityReservationsCommand).resolves({
      CapacityReservations: [{ CapacityReservationId: "cr-0123456789abcdef0", AvailabilityZone: "us-east-1b", InstanceType: "p4d.24xlarge", State: "active", TotalInstanceCount: 2 }],
    });
    expect(await preflightCommand(["--stack", file, "--online"], clients)).toBe(1);
    expect(out).toMatch(/invalid\s+reservation cr-0123456789abcdef0\s+it is in us-east-1b, configured for us-east-1a/);
  });

  it("capacity semantics: a maximum above the reservation's count, a block about to end, a plain reservation for a block class", () => {
    const today = new Date("2026-12-02T00:00:00Z");
    const want = { id: "cr-0123456789abcdef0", az: "us-east-1a", type: "p5.48xlarge", cls: "h100", block: false, max: 4, desired: 2, createSize: 2 };
    const cr = { CapacityReservationId: want.id, AvailabilityZone: "us-east-1a", InstanceType: "p5.48xlarge", State: "active" as const, TotalInstanceCount: 2 };
    expect(reservationRow(want, cr, "us-east-1", today)).toEqual({
      check: "reservation cr-0123456789abcdef0",
      status: "warn",
      detail: "p5.48xlarge × 2 in us-east-1a, active; the group in us-east-1a may grow to 4, above its 2: a targeted reservation does not overflow to On-Demand, launches past 2 fail (ReservationCapacityExceeded)",
      fix: "raise the reservation to 4 instances or lower gpuClasses[h100].maxPerAz",
    });
    expect(reservationRow({ ...want, max: 2 }, cr, "us-east-1", today).status).toBe("ok");
    const block = { ...cr, ReservationType: "capacity-block" as const, EndDate: new Date("2026-12-09T11:30:00Z") };
    const ending = reservationRow({ ...want, block: true, max: 2 }, block, "us-east-1", today);
    expect(ending.status).toBe("warn");
    expect(ending.detail).toBe("p5.48xlarge × 2 in us-east-1a, active until 2026-12-09 11:30 UTC; it ends in 7 days: EC2 takes its instances back then");
    expect(ending.fix).toBe("extend it before the end (its id stays), or buy the next Capacity Block and set gpuClasses[h100].capacityReservations.us-east-1a to it");
    expect(reservationRow({ ...want, block: true, max: 2 }, { ...block, EndDate: new Date("2027-03-01T11:30:00Z") }, "us-east-1", today).status).toBe("ok");
    expect(reservationRow({ ...want, block: true, max: 2 }, cr, "us-east-1", today)).toMatchObject({
      status: "invalid",
      detail: "the class is CAPACITY_BLOCK but this is a default reservation, not a Capacity Block",
    });
  });

  it("a failing AWS call is a failed row, not a crash", async () => {
    quotas.on(GetServiceQuotaCommand).rejects(Object.assign(new Error("not authorized"), { name: "AccessDeniedException" }));
    expect(await preflightCommand(["--stack", variant(), "--online"], clients)).toBe(1);
    expect(out).toMatch(/fail\s+GPU quota\s+the AWS call failed: AccessDeniedException: not authorized/);
  });

  it("skips the online calls while offline rows are missing", async () => {
    expect(await preflightCommand(["--stack", "prod", "--online"], clients)).toBe(1);
    expect(quotas.commandCalls(GetServiceQuotaCommand)).toHaveLength(0);
    expect(out).toMatch(/missing\s+online checks\s+skipped: fix the offline rows first/);
  });
});

describe("llm-ha preflight --online: add-on versions, agent image, weights (the aws CLI, faked)", () => {
  const ec2 = mockClient(EC2Client);
  const quotas = mockClient(ServiceQuotasClient);
  const route53 = mockClient(Route53Client);
  const DIGEST = `sha256:${"c3".repeat(32)}`;
  let out: string;
  let calls: string[][];

  const CLUSTER_ARN = "arn:aws:eks:us-east-1:111122223333:cluster/llm-ha-qa";
  /** Answers as `aws … --output json` does; `fail` maps a command to the error code the CLI prints; no cluster yet unless `cluster`. */
  function fakeCli(fail: Record<string, string> = {}, pinnedOffered = true, cluster: { scrapers: string[] } | null = null): AwsCli {
    return async (args) => {
      calls.push(args);
      const cmd = args.slice(0, 2).join(" ");
      if (fail[cmd]) throw new AwsCliError(`aws ${cmd}: An error occurred (${fail[cmd]})`, fail[cmd]);
      if (cmd === "eks describe-cluster") {
        if (!cluster) throw new AwsCliError("aws eks describe-cluster: An error occurred (ResourceNotFoundException)", "ResourceNotFoundException");
        return { cluster: { name: args[3], arn: CLUSTER_ARN } };
      }
      if (cmd === "amp list-scrapers") return { scrapers: (cluster?.scrapers ?? []).map((alias) => ({ alias, scraperId: `s-${alias}`, source: { eksConfiguration: { clusterArn: CLUSTER_ARN } } })) };
      if (cmd === "eks describe-addon-versions") {
        const name = args[args.indexOf("--addon-name") + 1];
        const k8s = args[args.indexOf("--kubernetes-version") + 1];
        const versions = [`v1.${name.length}.0-eksbuild.2`, `v1.${name.length}.0-eksbuild.1`, ...(pinnedOffered ? ["v1.20.4-eksbuild.2"] : [])];
        return { addons: [{ addonName: name, addonVersions: versions.map((v, i) => ({ addonVersion: v, compatibilities: [{ clusterVersion: k8s, defaultVersion: i === 0 }] })) }] };
      }
      if (cmd === "ecr describe-images") return { imageDetails: [{ imageDigest: DIGEST }] };
      if (cmd === "s3api list-objects-v2") return { Contents: COPY.map((f) => ({ Key: `models/qwen/${f.name}`, Size: f.size })) };
      if (cmd === "s3api get-object") {
        // As the CLI does: the body into the outfile (the last argument), the metadata as JSON.
        fs.writeFileSync(args[args.length - 1], JSON.stringify(manifest));
        return { ContentLength: 1 };
      }
      if (cmd === "acm describe-certificate") return ISSUED_CERT;
      if (cmd === "secretsmanager describe-secret") return PULL_THROUGH_SECRET;
      throw new Error(`unexpected aws ${args.join(" ")}`);
    };
  }
  const clients = (cli: AwsCli) => () => ({ ec2: new EC2Client({ region: "us-east-1" }), quotas: new ServiceQuotasClient({ region: "us-east-1" }), route53: new Route53Client({ region: "us-east-1" }), cli });
  const REV = "a09a35458c702b33eeacc393d103063234e8bc28";
  const withWeights = (y: string) => y.replace("    gpusPerPod: 1\n", `    gpusPerPod: 1\n    weightsS3Uri: s3://llm-ha-qa-weights/models/qwen\n    revision: ${REV}\n`);
  const COPY = [
    { name: "config.json", size: 663 },
    { name: "model-00001-of-00004.safetensors", size: 3_945_000_000 },
    { name: "llm-ha-manifest.json", size: 300 },
  ];
  let manifest: object;

  beforeEach(() => {
    out = "";
    calls = [];
    manifest = { version: 1, repo: "Qwen/Qwen2.5-7B-Instruct", revision: REV, files: COPY.slice(0, 2) };
    vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
    for (const m of [ec2, quotas, route53]) m.reset();
    quotas.on(GetServiceQuotaCommand).resolves({ Quota: { Value: 2000 } });
    ec2.on(DescribeInstanceTypesCommand).resolves(SYSTEM_TYPES);
    ec2.on(DescribeInstanceTypeOfferingsCommand).resolves({
      InstanceTypeOfferings: ["us-east-1a", "us-east-1b"].flatMap((az) => ["p4d.24xlarge" as const, "p4de.24xlarge" as const].map((t) => ({ InstanceType: t, Location: az }))),
    });
    route53.on(GetHostedZoneCommand).resolves({ HostedZone: { Id: "/hostedzone/Z04217753KQ3ZPLMVTB2", Name: "llm-ha.net.", CallerReference: "x", Config: { PrivateZone: false } } });
  });
  afterEach(() => vi.restoreAllMocks());

  it("all there: each add-on resolves for 1.36, the image digest exists in ECR, the weights prefix holds objects", async () => {
    expect(await preflightCommand(["--stack", variant(withWeights), "--online"], clients(fakeCli()))).toBe(0);
    expect(out).toMatch(/ok\s+add-on vpc-cni\s+resolves to v1\.7\.0-eksbuild\.2 for 1\.36/);
    expect(out).toMatch(/ok\s+agent image\s+llm-ha-qa\/agent@sha256:c3c3c3c3c3c3…/);
    expect(out).toMatch(/ok\s+model weights\s+s3:\/\/llm-ha-qa-weights\/models\/qwen holds Qwen\/Qwen2\.5-7B-Instruct@a09a35458c70: 2 files, 3\.9 GB/);
    expect(out).toMatch(/ok\s+certificate\s+ISSUED in us-east-1, infer\.qa\.llm-ha\.net covers infer\.qa\.llm-ha\.net/);
    expect(out).toMatch(/ok\s+pull-through secret\s+ecr-pullthroughcache\/docker-hub exists in us-east-1/);
    expect(calls).toContainEqual(["eks", "describe-addon-versions", "--kubernetes-version", "1.36", "--addon-name", "kube-proxy"]);
    expect(calls).toContainEqual(["ecr", "describe-images", "--registry-id", "111122223333", "--repository-name", "llm-ha-qa/agent", "--image-ids", `imageDigest=${DIGEST}`]);
    expect(calls).toContainEqual(["s3api", "list-objects-v2", "--bucket", "llm-ha-qa-weights", "--prefix", "models/qwen/"]);
    expect(calls).toContainEqual(["s3api", "get-object", "--bucket", "llm-ha-qa-weights", "--key", "models/qwen/llm-ha-manifest.json", expect.any(String)]);
  });

  it("a pinned add-on version EKS does not offer, an image not pushed, no weights under the prefix: each blocks with its fix", async () => {
    const file = variant((y) => withWeights(y).replace("config:\n", "config:\n  llm-ha:addonVersions:\n    vpc-cni: v1.20.4-eksbuild.2\n"));
    const cli: AwsCli = async (args) => {
      if (args[1] === "list-objects-v2") {
        calls.push(args);
        return { KeyCount: 0 };
      }
      return fakeCli({ "ecr describe-images": "ImageNotFoundException" }, false)(args);
    };
    expect(await preflightCommand(["--stack", file, "--online", "-o", "wide"], clients(cli))).toBe(1);
    expect(out).toMatch(/invalid\s+add-on vpc-cni\s+v1\.20\.4-eksbuild\.2 is not offered for Kubernetes 1\.36\s+remove llm-ha:addonVersions\.vpc-cni \(the stack resolves v1\.7\.0-eksbuild\.2\)/);
    expect(out).toMatch(/missing\s+agent image\s+sha256:c3c3.* is not in llm-ha-qa\/agent \(ImageNotFoundException\)/);
    expect(out).toMatch(/missing\s+model weights\s+nothing under s3:\/\/llm-ha-qa-weights\/models\/qwen/);
    expect(out).toMatch(/3 blocking\n$/);
  });

  it("the S3 copy of another revision, without a manifest, or cut short: each blocks with the copy command", async () => {
    const run = async (): Promise<void> => {
      out = "";
      expect(await preflightCommand(["--stack", variant(withWeights), "--online", "-o", "wide"], clients(fakeCli()))).toBe(1);
    };
    manifest = { version: 1, repo: "Qwen/Qwen2.5-7B-Instruct", revision: "b".repeat(40), files: COPY.slice(0, 2) };
    await run();
    expect(out).toMatch(new RegExp(`invalid\\s+model weights\\s+s3://llm-ha-qa-weights/models/qwen holds Qwen/Qwen2\\.5-7B-Instruct@${"b".repeat(40)}; llm-ha:inference\\.revision pins ${REV}`));
    expect(out).toContain(`huggingface-cli download Qwen/Qwen2.5-7B-Instruct --revision ${REV} --local-dir ./Qwen2.5-7B-Instruct`);
    expect(out).toContain("aws s3 cp ./Qwen2.5-7B-Instruct/llm-ha-manifest.json s3://llm-ha-qa-weights/models/qwen/llm-ha-manifest.json");
    manifest = { version: 1, repo: "Qwen/Qwen2.5-7B-Instruct", revision: REV, files: [...COPY.slice(0, 2), { name: "model-00002-of-00004.safetensors", size: 3_864_000_000 }] };
    await run();
    expect(out).toMatch(/invalid\s+model weights\s+s3:\/\/llm-ha-qa-weights\/models\/qwen is incomplete: 1 of 3 files in the manifest are missing or of another size \(model-00002-of-00004\.safetensors: missing/);
    const noManifest: AwsCli = async (args) => {
      if (args[1] === "get-object") throw new AwsCliError("aws s3api get-object: An error occurred (NoSuchKey)", "NoSuchKey");
      return fakeCli()(args);
    };
    out = "";
    expect(await preflightCommand(["--stack", variant(withWeights), "--online", "-o", "wide"], clients(noManifest))).toBe(1);
    expect(out).toMatch(/missing\s+model weights\s+s3:\/\/llm-ha-qa-weights\/models\/qwen has 3 objects but no llm-ha-manifest\.json/);
  });

  it("no weights in S3: a warning (every woken node pulls from the hub through NAT), not a block", async () => {
    expect(await preflightCommand(["--stack", variant(), "--online"], clients(fakeCli()))).toBe(0);
    expect(out).toMatch(/warn\s+model weights\s+llm-ha:inference\.weightsS3Uri is not set/);
  });

  it("who reads the alert rules: none before the cluster exists, an AMP scraper on it, or the kubectl command for an in-cluster one", async () => {
    expect(await preflightCommand(["--stack", variant(), "--online"], clients(fakeCli()))).toBe(0);
    expect(out).toMatch(/warn\s+prometheus\s+cluster \S+ does not exist yet; the stack installs no Prometheus/);
    out = "";
    expect(await preflightCommand(["--stack", variant(), "--online"], clients(fakeCli({}, true, { scrapers: ["llm-ha-qa-scraper"] })))).toBe(0);
    expect(out).toMatch(/ok\s+prometheus\s+Amazon Managed Prometheus scraper llm-ha-qa-scraper reads/);
    out = "";
    const operator = variant((y) => y.replace("config:\n", "config:\n  llm-ha:observability:\n    prometheusOperator: true\n"));
    expect(await preflightCommand(["--stack", operator, "--online"], clients(fakeCli({}, true, { scrapers: [] })))).toBe(0);
    expect(out).toMatch(/warn\s+prometheus\s+no Amazon Managed Prometheus scraper reads .* kubectl get crd prometheusrules\.monitoring\.coreos\.com podmonitors/s);
  });

  it("a failing CLI call is a failed row naming the permissions", async () => {
    expect(await preflightCommand(["--stack", variant(), "--online"], clients(fakeCli({ "eks describe-addon-versions": "AccessDeniedException" })))).toBe(1);
    expect(out).toMatch(/fail\s+add-on versions\s+the AWS call failed: AwsCliError: aws eks describe-addon-versions: An error occurred \(AccessDeniedException\)/);
  });
});
