/**
 * `llm-ha preflight --online` on what a fresh AWS account lacks and `pulumi up` would only find
 * at create time: the Standard On-Demand vCPU quota of the system nodes, a reservation or
 * Capacity Block not active yet or without room, the ACM certificate, the Docker Hub
 * pull-through secret. AWS answers are faked: aws-sdk-client-mock for EC2 and Service Quotas,
 * a function answering as the `aws` CLI does for ACM and Secrets Manager.
 */
import { DescribeCapacityReservationsCommand, DescribeInstanceTypeOfferingsCommand, DescribeInstanceTypesCommand, EC2Client, type CapacityReservation } from "@aws-sdk/client-ec2";
import { GetHostedZoneCommand, Route53Client } from "@aws-sdk/client-route-53";
import { GetAWSDefaultServiceQuotaCommand, GetServiceQuotaCommand, ServiceQuotasClient } from "@aws-sdk/client-service-quotas";
import { mockClient } from "aws-sdk-client-mock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { preflightCommand } from "../../infra/preflight/command";
import { AwsCliError, type AwsCli } from "../../infra/preflight/aws-cli";
import { isStandardType } from "../../infra/preflight/quotas";
import { reservationRow } from "../../infra/preflight/reservations";
import { nameCovers, secretNameOf } from "../../infra/preflight/edge-checks";
import { CERT_ARN, ISSUED_CERT, PULL_THROUGH_SECRET, SECRET_ARN, SYSTEM_TYPES, variant } from "./stack-variant";

const ec2 = mockClient(EC2Client);
const quotas = mockClient(ServiceQuotasClient);
const route53 = mockClient(Route53Client);
let out: string;
let calls: string[][];

/** Answers as `aws … --output json` does: `answers` by "<service> <operation>", an AwsCliError for a code; every other call as for a stack that is ready. */
function fakeCli(answers: Record<string, unknown> = {}): AwsCli {
  return async (args) => {
    calls.push(args);
    const cmd = args.slice(0, 2).join(" ");
    const a = answers[cmd];
    if (a instanceof AwsCliError) throw a;
    if (a !== undefined) return a;
    if (cmd === "acm describe-certificate") return ISSUED_CERT;
    if (cmd === "secretsmanager describe-secret") return PULL_THROUGH_SECRET;
    if (cmd === "eks describe-cluster") throw new AwsCliError("aws eks describe-cluster: An error occurred (ResourceNotFoundException)", "ResourceNotFoundException");
    if (cmd === "eks describe-addon-versions") {
      const k8s = args[args.indexOf("--kubernetes-version") + 1];
      return { addons: [{ addonVersions: [{ addonVersion: "v1.0.0-eksbuild.1", compatibilities: [{ clusterVersion: k8s, defaultVersion: true }] }] }] };
    }
    if (cmd === "ecr describe-images") return { imageDetails: [{}] };
    throw new Error(`unexpected aws ${args.join(" ")}`);
  };
}
const notFound = (cmd: string) => new AwsCliError(`aws ${cmd}: An error occurred (ResourceNotFoundException)`, "ResourceNotFoundException");
const clients = (cli?: AwsCli) => () => ({ ec2: new EC2Client({ region: "us-east-1" }), quotas: new ServiceQuotasClient({ region: "us-east-1" }), route53: new Route53Client({ region: "us-east-1" }), cli });
const run = (file: string, cli?: AwsCli) => preflightCommand(["--stack", file, "--online", "-o", "wide"], clients(cli));

beforeEach(() => {
  out = "";
  calls = [];
  vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  for (const m of [ec2, quotas, route53]) m.reset();
  quotas.on(GetServiceQuotaCommand, { ServiceCode: "ec2", QuotaCode: "L-417A185B" }).resolves({ Quota: { Value: 2000 } });
  quotas.on(GetServiceQuotaCommand, { ServiceCode: "ec2", QuotaCode: "L-1216C47A" }).resolves({ Quota: { Value: 32 } });
  ec2.on(DescribeInstanceTypesCommand).resolves(SYSTEM_TYPES);
  ec2.on(DescribeInstanceTypeOfferingsCommand).resolves({
    InstanceTypeOfferings: ["us-east-1a", "us-east-1b"].flatMap((az) => ["p4d.24xlarge" as const, "p4de.24xlarge" as const].map((t) => ({ InstanceType: t, Location: az }))),
  });
  route53.on(GetHostedZoneCommand).resolves({ HostedZone: { Id: "/hostedzone/Z04217753KQ3ZPLMVTB2", Name: "llm-ha.net.", CallerReference: "x", Config: { PrivateZone: false } } });
});
afterEach(() => vi.restoreAllMocks());

describe("Standard On-Demand quota (L-1216C47A) for the system nodes at their maximum", () => {
  const prodLike = (y: string) => y.replace("    instanceType: m6i.large\n    desiredSize: 2\n    maxSize: 3\n", "    instanceType: m6i.xlarge\n    desiredSize: 6\n    maxSize: 12\n");

  it("short: a blocking row with the quota request for the vCPUs needed, exit 1", async () => {
    ec2.on(DescribeInstanceTypesCommand).resolves({ InstanceTypes: [{ InstanceType: "m6i.xlarge", VCpuInfo: { DefaultVCpus: 4 } }] });
    expect(await run(variant(prodLike))).toBe(1);
    expect(out).toMatch(/missing\s+Standard quota\s+Running On-Demand Standard \(A, C, D, H, I, M, R, T, Z\) instances: 32 vCPUs in us-east-1, 48 needed at the maximum \(system node groups \(6 in each of 2 AZs\) 12 × m6i\.xlarge \(4 vCPUs\)\)/);
    expect(out).toContain("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-1216C47A --desired-value 48 --region us-east-1");
    expect(out).toMatch(/1 blocking\n$/);
    expect(ec2.commandCalls(DescribeInstanceTypesCommand)[0].args[0].input.InstanceTypes).toEqual(["m6i.xlarge"]);
  });

  it("enough: ok, exit 0; with no applied value, AWS's default is the quota", async () => {
    quotas.on(GetServiceQuotaCommand, { ServiceCode: "ec2", QuotaCode: "L-1216C47A" }).rejects(Object.assign(new Error("no applied quota"), { name: "NoSuchResourceException" }));
    quotas.on(GetAWSDefaultServiceQuotaCommand, { ServiceCode: "ec2", QuotaCode: "L-1216C47A" }).resolves({ Quota: { Value: 64 } });
    ec2.on(DescribeInstanceTypesCommand).resolves({ InstanceTypes: [{ InstanceType: "m6i.xlarge", VCpuInfo: { DefaultVCpus: 4 } }] });
    expect(await run(variant(prodLike), fakeCli())).toBe(0);
    expect(out).toMatch(/ok\s+Standard quota\s+Running On-Demand Standard \(A, C, D, H, I, M, R, T, Z\) instances: 64 vCPUs ≥ 48 needed/);
    expect(quotas.commandCalls(GetAWSDefaultServiceQuotaCommand)).toHaveLength(1);
  });

  it("a system instance type EC2 does not know: invalid, naming the key", async () => {
    ec2.on(DescribeInstanceTypesCommand).rejects(Object.assign(new Error("The following supplied instance types do not exist: [m6i.hueg]"), { name: "InvalidInstanceType" }));
    expect(await run(variant((y) => y.replace("instanceType: m6i.large", "instanceType: m6i.hueg")))).toBe(1);
    expect(out).toMatch(/invalid\s+Standard quota\s+EC2 knows no instance type m6i\.hueg in us-east-1 \(llm-ha:systemNodes\.instanceType\)/);
  });

  it("which families the Standard quota counts", () => {
    for (const t of ["m6i.large", "c7g.xlarge", "r6i.2xlarge", "t3.medium", "i4i.large", "im4gn.large", "z1d.large", "a1.large", "d3.xlarge", "h1.2xlarge"]) expect(isStandardType(t), t).toBe(true);
    for (const t of ["p5.48xlarge", "g5.xlarge", "inf2.xlarge", "trn1.2xlarge", "dl1.24xlarge", "hpc7g.4xlarge", "x2idn.16xlarge", "mac1.metal"]) expect(isStandardType(t), t).toBe(false);
  });
});

describe("capacity reservations and Capacity Blocks: active, with the group's size free", () => {
  const CR_A = "cr-0aaaaaaaaaaaaaaa1";
  const CR_B = "cr-0bbbbbbbbbbbbbbb2";
  const blocks = (y: string) => y.replace("    - name: a100\n", `    - name: a100\n      capacityType: CAPACITY_BLOCK\n      capacityReservations:\n        us-east-1a: ${CR_A}\n        us-east-1b: ${CR_B}\n`);
  const block = (id: string, az: string, extra: Partial<CapacityReservation>): CapacityReservation => ({
    CapacityReservationId: id, AvailabilityZone: az, InstanceType: "p4d.24xlarge", ReservationType: "capacity-block", State: "active", TotalInstanceCount: 2, AvailableInstanceCount: 2, ...extra,
  });

  it("a Capacity Block scheduled to start later blocks, naming its id, state and start, and that the group is created at 0 and sized later", async () => {
    const start = new Date(Date.now() + 3 * 86_400_000);
    start.setUTCHours(11, 30, 0, 0);
    const day = start.toISOString().slice(0, 10);
    ec2.on(DescribeCapacityReservationsCommand).resolves({ CapacityReservations: [block(CR_A, "us-east-1a", { State: "scheduled", StartDate: start, AvailableInstanceCount: 0 }), block(CR_B, "us-east-1b", {})] });
    expect(await run(variant(blocks))).toBe(1);
    expect(out).toMatch(new RegExp(`missing\\s+reservation ${CR_A}\\s+p4d\\.24xlarge × 2 in us-east-1a, scheduled, starts ${day} 11:30 UTC: not active, no instance launches into it yet; the stack creates the group in us-east-1a at 0, and the leader sizes it to 1 once the reservation is active \\(LLMHA_RESERVED_GROUPS; a standby AZ's group on its wake\\)`));
    expect(out).toContain(`wait until ${day} 11:30 UTC (aws ec2 describe-capacity-reservations --capacity-reservation-ids ${CR_A} --region us-east-1`);
    expect(out).toMatch(new RegExp(`ok\\s+reservation ${CR_B}\\s+p4d\\.24xlarge × 2 in us-east-1b, active`));
    expect(out).toMatch(/1 blocking\n$/);
  });

  it("an active reservation with fewer instances free than the group's size blocks; with room, nothing blocks", async () => {
    const plain = (y: string) => y.replace("    - name: a100\n", `    - name: a100\n      capacityReservations:\n        us-east-1a: ${CR_A}\n`);
    const cr: CapacityReservation = { CapacityReservationId: CR_A, AvailabilityZone: "us-east-1a", InstanceType: "p4d.24xlarge", State: "active", TotalInstanceCount: 2, AvailableInstanceCount: 0 };
    ec2.on(DescribeCapacityReservationsCommand).resolves({ CapacityReservations: [cr] });
    expect(await run(variant(plain))).toBe(1);
    expect(out).toMatch(new RegExp(`missing\\s+reservation ${CR_A}\\s+p4d\\.24xlarge × 2 in us-east-1a, active, 0 free \\(2 held by running instances\\); the group in us-east-1a needs 1`));
    expect(out).toContain(`aws ec2 modify-capacity-reservation --capacity-reservation-id ${CR_A} --instance-count 3 --region us-east-1`);
    out = "";
    ec2.on(DescribeCapacityReservationsCommand).resolves({ CapacityReservations: [{ ...cr, AvailableInstanceCount: 2 }] });
    expect(await run(variant(plain))).toBe(0);
    expect(out).toMatch(new RegExp(`ok\\s+reservation ${CR_A}\\s+p4d\\.24xlarge × 2 in us-east-1a, active`));
  });

  it("the row's words follow the create size, and a group at 0 is only warned", () => {
    const today = new Date("2026-12-05T00:00:00Z");
    const want = { id: CR_A, az: "us-east-1a", type: "p5.48xlarge", cls: "h100", block: true, max: 2, desired: 2, createSize: 2 };
    const x = block(CR_A, "us-east-1a", { InstanceType: "p5.48xlarge", State: "scheduled", StartDate: new Date("2026-12-10T11:30:00Z") });
    expect(reservationRow(want, x, "us-east-1", today)).toMatchObject({ status: "missing", fix: expect.stringMatching(/^wait until 2026-12-10 11:30 UTC .*, or set gpuClasses\[h100\]\.desiredPerAz: 0/) });
    // A block class cannot drop its reservation: the fix does not offer it.
    expect(reservationRow(want, x, "us-east-1", today).fix).not.toContain("remove gpuClasses");
    const atZero = reservationRow({ ...want, createSize: 0 }, x, "us-east-1", today);
    expect(atZero.status).toBe("missing");
    expect(atZero.detail).toContain("the stack creates the group in us-east-1a at 0, and the leader sizes it to 2 once the reservation is active (LLMHA_RESERVED_GROUPS; a standby AZ's group on its wake)");
    expect(reservationRow({ ...want, desired: 0, createSize: 0 }, x, "us-east-1", today).status).toBe("warn");
    expect(reservationRow(want, { ...x, State: "expired" }, "us-east-1", today)).toMatchObject({ status: "invalid", detail: "its state is expired" });
    expect(reservationRow(want, { ...x, State: "pending", StartDate: undefined }, "us-east-1", today).fix).toMatch(/^wait until it is active/);
  });
});

describe("the ACM certificate (llm-ha:edge.certificateArn)", () => {
  const cert = (extra: Record<string, unknown>) => ({ "acm describe-certificate": { Certificate: { ...ISSUED_CERT.Certificate, ...extra } } });

  it("not ISSUED: blocks with the validation record to create", async () => {
    expect(await run(variant(), fakeCli(cert({ Status: "PENDING_VALIDATION" })))).toBe(1);
    expect(out).toMatch(/invalid\s+certificate status\s+PENDING_VALIDATION, not ISSUED: the NLB's TLS listener refuses it \(arn:aws:acm:/);
    expect(out).toContain("--query 'Certificate.DomainValidationOptions[].ResourceRecord'");
    expect(calls).toContainEqual(["acm", "describe-certificate", "--certificate-arn", CERT_ARN]);
    expect(out).toMatch(/1 blocking\n$/);
  });

  it("names that do not cover the service name block; a one-label wildcard covers it", async () => {
    expect(await run(variant(), fakeCli(cert({ DomainName: "*.llm-ha.net", SubjectAlternativeNames: ["*.llm-ha.net", "llm-ha.net"] })))).toBe(1);
    expect(out).toMatch(/invalid\s+certificate names\s+none of \*\.llm-ha\.net, llm-ha\.net covers infer\.qa\.llm-ha\.net/);
    expect(out).toContain("aws acm request-certificate --domain-name infer.qa.llm-ha.net --validation-method DNS --region us-east-1");
    out = "";
    expect(await run(variant(), fakeCli(cert({ DomainName: "llm-ha.net", SubjectAlternativeNames: ["llm-ha.net", "*.qa.llm-ha.net"] })))).toBe(0);
    expect(out).toMatch(/ok\s+certificate\s+ISSUED in us-east-1, \*\.qa\.llm-ha\.net covers infer\.qa\.llm-ha\.net/);
  });

  it("both faults at once: a row each", async () => {
    expect(await run(variant(), fakeCli(cert({ Status: "EXPIRED", DomainName: "old.example.org", SubjectAlternativeNames: [] })))).toBe(1);
    expect(out).toMatch(/invalid\s+certificate status\s+EXPIRED, not ISSUED/);
    expect(out).toMatch(/invalid\s+certificate names/);
    expect(out).toMatch(/2 blocking\n$/);
  });

  it("in another region than the stack: blocks without calling ACM there", async () => {
    const other = CERT_ARN.replace("us-east-1", "eu-west-1");
    expect(await run(variant((y) => y.replace(CERT_ARN, other)), fakeCli())).toBe(1);
    expect(out).toMatch(/invalid\s+certificate region\s+in eu-west-1, the stack in us-east-1: an NLB takes a certificate of its own region only/);
    expect(out).toContain("set llm-ha:edge.certificateArn to a certificate in us-east-1: aws acm request-certificate");
    expect(calls.filter((a) => a[0] === "acm")).toEqual([]);
  });

  it("not in the account: missing", async () => {
    expect(await run(variant(), fakeCli({ "acm describe-certificate": notFound("acm describe-certificate") }))).toBe(1);
    expect(out).toMatch(/missing\s+certificate\s+not in this account's us-east-1: arn:aws:acm:/);
  });

  it("a wildcard covers exactly one label", () => {
    expect(nameCovers("*.example.org", "infer.example.org")).toBe(true);
    expect(nameCovers("*.Example.org.", "INFER.example.org")).toBe(true);
    expect(nameCovers("*.example.org", "example.org")).toBe(false);
    expect(nameCovers("*.example.org", "a.infer.example.org")).toBe(false);
    expect(nameCovers("infer.example.org", "infer.example.org")).toBe(true);
    expect(nameCovers("example.org", "infer.example.org")).toBe(false);
  });
});

describe("the Docker Hub pull-through secret (llm-ha:images.dockerHubSecretArn)", () => {
  it("not in Secrets Manager: blocks with the create-secret command, the value read from a file", async () => {
    expect(await run(variant(), fakeCli({ "secretsmanager describe-secret": notFound("secretsmanager describe-secret") }))).toBe(1);
    expect(out).toMatch(/missing\s+pull-through secret\s+not in this account's us-east-1: arn:aws:secretsmanager:/);
    expect(out).toContain("aws secretsmanager create-secret --name ecr-pullthroughcache/docker-hub --secret-string file://docker-hub.json --region us-east-1");
    expect(calls).toContainEqual(["secretsmanager", "describe-secret", "--secret-id", SECRET_ARN]);
    // Never the value: describe-secret is the only Secrets Manager call.
    expect(calls.filter((a) => a[0] === "secretsmanager").map((a) => a[1])).toEqual(["describe-secret"]);
    expect(out).toMatch(/1 blocking\n$/);
  });

  it("in another region than the stack: blocks without calling there", async () => {
    const other = SECRET_ARN.replace("us-east-1", "us-west-2");
    expect(await run(variant((y) => y.replace(SECRET_ARN, other)), fakeCli())).toBe(1);
    expect(out).toMatch(/invalid\s+pull-through secret region\s+in us-west-2, the stack in us-east-1: ECR's pull-through cache rule takes a secret of its own region only/);
    expect(calls.filter((a) => a[0] === "secretsmanager")).toEqual([]);
  });

  it("a name without ecr-pullthroughcache/, or a secret being deleted: blocks", async () => {
    expect(await run(variant(), fakeCli({ "secretsmanager describe-secret": { ARN: SECRET_ARN, Name: "docker-hub" } }))).toBe(1);
    expect(out).toMatch(/invalid\s+pull-through secret name\s+named docker-hub: ECR refuses a pull-through cache secret whose name does not start with ecr-pullthroughcache\//);
    out = "";
    expect(await run(variant(), fakeCli({ "secretsmanager describe-secret": { ...PULL_THROUGH_SECRET, DeletedDate: "2026-12-04T10:00:00Z" } }))).toBe(1);
    expect(out).toMatch(/invalid\s+pull-through secret\s+ecr-pullthroughcache\/docker-hub is scheduled for deletion: ECR cannot pull through it once it is gone\s+aws secretsmanager restore-secret/);
  });

  it("the name inside an ARN", () => {
    expect(secretNameOf(SECRET_ARN)).toBe("ecr-pullthroughcache/docker-hub");
  });
});
