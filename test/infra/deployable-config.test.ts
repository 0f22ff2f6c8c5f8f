/**
 * A fresh account gets a stack that can come up. Placeholders and half-done
 * settings are refused with the key named; the stack files carry none of them.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { stackFailure } from "./stack-failure";
import { captureStack, stackConfig, type CapturedResource } from "../../infra/capture";
import { missingUserSettings, USER_SETTINGS, withStandIns } from "../../infra/user-settings";
import { resolveConfig } from "../../infra/config";
import { DEFAULT_EKS_VERSION, eksSupportEndingSoon, eksVersionProblem, EKS_VERSIONS } from "../../contracts/eks-versions";
import { kubernetesVersionCheck } from "../../infra/config/cluster";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const failure = stackFailure;
const paths = (e: pulumi.InputPropertiesError) => e.errors.map((x) => x.propertyPath);
const DNS = { ttl: 30, failureThreshold: 2 };
const DIGEST = `123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha-dev/agent@sha256:${"ab".repeat(32)}`;

/** Resolves a stack file's values as the program does, without stand-ins. */
function resolve(values: Record<string, string>, secrets: string[] = [], stack = "t") {
  pulumi.runtime.setAllConfig(values, secrets);
  return resolveConfig({ project: new pulumi.Config("llm-ha"), aws: new pulumi.Config("aws"), stack });
}

describe("the stack files carry no placeholder that passes validation", () => {
  for (const env of ["dev", "staging", "prod"] as const) {
    it(`${env}: resolving the file as it is names every user setting it lacks`, () => {
      const values = stackConfig(env);
      let err: unknown;
      try {
        resolve(values, [], env);
      } catch (e) {
        err = e;
      }
      expect(pulumi.InputPropertiesError.isInstance(err)).toBe(true);
      const missing = missingUserSettings(values, env).map((s) => s.key);
      expect(missing).toEqual(expect.arrayContaining(["llm-ha:redisRolePasswords", "llm-ha:dns.zoneId", "llm-ha:dns.serviceName", "llm-ha:apiEndpoint", "llm-ha:agentImage"]));
      for (const k of missing) expect((err as Error).message, k).toContain(k);
      // Nothing that looks like the old placeholders is left.
      const text = JSON.stringify(values);
      for (const p of ["example.com", "Z0123456789", "ghcr.io/llm-ha/agent", "privateEndpointOnly", '"efa"']) expect(text).not.toContain(p);
    });
  }

  it("the offline stand-ins pass, and only in the offline tools", () => {
    const { values, filled } = withStandIns(stackConfig("prod"), "prod");
    // Every setting prod needs (the aws-cli digest only with an S3 copy of the weights).
    expect(filled.sort()).toEqual(USER_SETTINGS.filter((s) => s.needed(stackConfig("prod"), "prod")).map((s) => s.key).sort());
    // Prod's weights come from S3 (a bucket of the user's, pinned to a revision), never the hub: no token.
    expect(filled).toEqual(expect.arrayContaining(["llm-ha:inference.weightsS3Uri", "llm-ha:inference.revision"]));
    expect(filled).not.toContain("llm-ha:hfToken");
    expect(() => resolve(values, ["llm-ha:redisAuthToken", "llm-ha:hfToken"], "prod")).not.toThrow();
  });
});

describe("user settings are refused with the key named", () => {
  it("refuses the example hosted zone, a reserved domain and a zone id that is none", async () => {
    const e = await failure({ "llm-ha:dns": JSON.stringify({ ...DNS, zoneId: "Z0123456789PRODZON", serviceName: "infer.llm-ha.example.com" }) });
    expect(paths(e)).toEqual(["llm-ha:dns.serviceName", "llm-ha:dns.zoneId"]);
    expect(e.message).toMatch(/example placeholder/);
    expect(e.message).toMatch(/reserved example domain/);
    const bad = await failure({ "llm-ha:dns": JSON.stringify({ ...DNS, zoneId: "my-zone", serviceName: "infer.llm-ha.net" }) });
    expect(paths(bad)).toEqual(["llm-ha:dns.zoneId"]);
  });

  it("refuses an agent image nobody publishes, a tag, and a missing one; takes a digest or a build", async () => {
    expect(paths(await failure({ "llm-ha:agentImage": "ghcr.io/llm-ha/agent:0.1.0" }))).toEqual(["llm-ha:agentImage"]);
    const tag = await failure({ "llm-ha:agentImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/agent:1.0" });
    expect(tag.message).toMatch(/by digest/);
    const rs = await captureStack("dev", { "llm-ha:agentImage": DIGEST });
    const ds = rs.find((r) => r.type === "kubernetes:apps/v1:DaemonSet" && r.name.endsWith("-agent"))!.props as O;
    expect(ds.spec.template.spec.containers[0].image).toBe(DIGEST);
    expect(paths(await failure({ "llm-ha:agentImage": DIGEST, "llm-ha:agentImageBuild": "true" }))).toEqual(["llm-ha:agentImage"]);
  });

  it("builds and pushes the agent image to the stack's ECR repository when asked (docker-build)", async () => {
    const rs = await captureStack("dev", { "llm-ha:agentImageBuild": "true" });
    const [img] = rs.filter((r) => r.type === "docker-build:index:Image");
    expect(img.props).toMatchObject({ push: true, platforms: ["linux/amd64"], tags: ["123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha-dev/agent:dev"] });
    expect(String((img.props as O).dockerfile.location)).toMatch(/agent\/Dockerfile$/);
    const ds = rs.find((r) => r.type === "kubernetes:apps/v1:DaemonSet" && r.name.endsWith("-agent"))!.props as O;
    expect(ds.spec.template.spec.containers[0].image).toBe(`123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha-dev/agent@sha256:${"d1".repeat(32)}`);
  });

  it("API endpoint: requires the choice, refuses 0.0.0.0/0, and the old privateEndpointOnly", async () => {
    const none = await failure({ "llm-ha:apiEndpoint": "" });
    expect(paths(none)).toEqual(["llm-ha:apiEndpoint"]);
    expect(none.message).toMatch(/access: public with publicAccessCidrs.*or access: private with runnerCidrs/);
    const world = await failure({ "llm-ha:apiEndpoint": JSON.stringify({ access: "public", publicAccessCidrs: ["0.0.0.0/0"] }) });
    expect(paths(world)).toEqual(["llm-ha:apiEndpoint.publicAccessCidrs"]);
    const empty = await failure({ "llm-ha:apiEndpoint": JSON.stringify({ access: "private" }) });
    expect(paths(empty)).toEqual(["llm-ha:apiEndpoint.runnerCidrs"]);
    expect(paths(await failure({ "llm-ha:privateEndpointOnly": "true" }))).toEqual(["llm-ha:privateEndpointOnly"]);
  });

  it("API endpoint private: no public endpoint, the runner's CIDRs reach :443 on the cluster security group", async () => {
    const rs = await captureStack("dev", { "llm-ha:apiEndpoint": JSON.stringify({ access: "private", runnerCidrs: ["10.200.0.0/16"] }) });
    const cluster = rs.find((r) => r.type === "aws:eks/cluster:Cluster")!.props as O;
    expect(cluster.vpcConfig).toMatchObject({ endpointPublicAccess: false, endpointPrivateAccess: true });
    expect(cluster.vpcConfig.publicAccessCidrs).toBeUndefined();
    // CIDR rules only: the pod roles' groups reach :443 by reference (infra/fences.ts).
    const rules = rs.filter((r) => r.type === "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule" && (r.props as O).fromPort === 443 && (r.props as O).cidrIpv4).map((r) => r.props as O);
    expect(rules).toEqual([expect.objectContaining({ cidrIpv4: "10.200.0.0/16", toPort: 443, securityGroupId: "sg-eks-eks" })]);
  });

  it("a gated model needs llm-ha:hfToken (or an S3 copy of the weights) where the hub is allowed", async () => {
    const gated = JSON.stringify({ ...JSON.parse(stackConfig("staging")["llm-ha:inference"]), model: "meta-llama/Llama-3.1-70B-Instruct" });
    const e = await failure({ "llm-ha:hfToken": "", "llm-ha:inference": gated }, "staging");
    expect(paths(e)).toEqual(["llm-ha:hfToken"]);
    expect(e.message).toMatch(/meta-llama\/Llama-3.1-70B-Instruct is a gated Hugging Face model/);
    const s3 = JSON.stringify({ ...JSON.parse(gated), weightsS3Uri: "s3://my-weights/llama-70b", revision: "1".repeat(40) });
    await expect(captureStack("staging", { "llm-ha:hfToken": "", "llm-ha:inference": s3 })).resolves.toBeDefined();
  });

  it("prod refuses the hub: no S3 copy, or a Hugging Face token, is named with what to set", () => {
    const { values } = withStandIns(stackConfig("prod"), "prod");
    const refusal = (inference: O, extra: Record<string, string> = {}): pulumi.InputPropertiesError => {
      try {
        resolve({ ...values, "llm-ha:inference": JSON.stringify(inference), ...extra }, ["llm-ha:redisAuthToken", "llm-ha:hfToken"], "prod");
      } catch (e) {
        if (pulumi.InputPropertiesError.isInstance(e)) return e;
        throw e;
      }
      throw new Error("prod resolved");
    };
    const { weightsS3Uri, revision, ...hub } = JSON.parse(values["llm-ha:inference"]) as O;
    expect(weightsS3Uri).toMatch(/^s3:\/\//);
    const e = refusal(hub, { "llm-ha:hfToken": "hf_x" });
    expect(paths(e).sort()).toEqual(["llm-ha:hfToken", "llm-ha:inference.revision", "llm-ha:inference.weightsS3Uri"]);
    expect(e.message).toMatch(/llm-ha:inference\.weightsS3Uri: is required in prod: its nodes load the model from S3 in the VPC, never from the Hugging Face hub/);
    expect(e.message).toMatch(/llm-ha:hfToken: must not be set in prod/);
    // An S3 copy without its pinned revision: preflight could not tell which commit it holds.
    expect(paths(refusal({ ...hub, weightsS3Uri }))).toEqual(["llm-ha:inference.revision"]);
    expect(paths(refusal({ ...hub, weightsS3Uri, revision: "main" }))).toEqual(["llm-ha:inference.revision"]);
    expect(() => resolve({ ...values, "llm-ha:inference": JSON.stringify({ ...hub, weightsS3Uri, revision }) }, ["llm-ha:redisAuthToken"], "prod")).not.toThrow();
  });

  it("the Hugging Face token reaches the pods through a Secret, never in clear in a manifest or a stack output", async () => {
    const token = "hf_secret_value_0123456789";
    const rs = await captureStack("dev", { "llm-ha:hfToken": token });
    const holders = rs.filter((r) => JSON.stringify(r.props).includes(token));
    expect(holders.map((r) => r.type)).toEqual(["kubernetes:core/v1:Secret"]);
    expect((holders[0].props as O).stringData).toEqual({ token });
    // No stack output carries it either.
    expect(readFileSync(join(__dirname, "../../infra/index.ts"), "utf8")).not.toMatch(/hfToken|HF_TOKEN/);
  });

  it("every output docs/infra.md names (and tells users to read) is one the program exports", () => {
    const docs = readFileSync(join(__dirname, "../../docs/infra.md"), "utf8");
    const line = /^Outputs: ([\s\S]*?)\n\n/m.exec(docs)?.[1] ?? "";
    const named = [...line.matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]);
    expect(named).toContain("gpuScaleUp");
    const program = readFileSync(join(__dirname, "../../infra/index.ts"), "utf8");
    const exported = [...program.matchAll(/^\s+([A-Za-z]+): out\./gm)].map((m) => m[1]);
    expect(exported.sort()).toEqual([...named].sort());
  });

  it("EFA is refused with the reason; the launch templates carry no EFA interface", async () => {
    const gpu = JSON.stringify([{ name: "h100", desiredPerAz: 1, maxPerAz: 2, efa: true }]);
    const e = await failure({ "llm-ha:gpuClasses": gpu });
    expect(paths(e)).toEqual(["llm-ha:gpuClasses[0].efa"]);
    expect(e.message).toMatch(/NVLink/);
  });

  it("EKS version: defaults to one in standard support; one past its support warns (the stack still runs), an unknown one is refused", async () => {
    const values = { ...withStandIns(stackConfig("dev"), "dev").values };
    const resolveOn = (version: string, warnings: string[]) => {
      pulumi.runtime.setAllConfig({ ...values, "llm-ha:kubernetesVersion": version }, ["llm-ha:redisAuthToken"]);
      return resolveConfig({ project: new pulumi.Config("llm-ha"), aws: new pulumi.Config("aws"), stack: "dev", warn: (m) => warnings.push(m) });
    };
    const warned: string[] = [];
    expect(resolveOn("1.31", warned).kubernetesVersion).toBe("1.31");
    expect(warned).toEqual([expect.stringMatching(/^llm-ha:kubernetesVersion: EKS version 1.31 left standard support on 2025-11-26/)]);
    // 1.36 is in the table and in standard support: no warning.
    const current: string[] = [];
    expect(resolveOn("1.36", current).kubernetesVersion).toBe("1.36");
    expect(current).toEqual([]);
    expect(eksVersionProblem("1.36", "2026-12-02")).toBeUndefined();
    expect(EKS_VERSIONS.map((v) => v.version)).toContain("1.36");
    // A version newer than the table runs, with a warning to add its row.
    const newer: string[] = [];
    expect(resolveOn("1.37", newer).kubernetesVersion).toBe("1.37");
    expect(newer[0]).toMatch(/1.37 is newer than the support table/);
    // 1.29 also puts no node in projected tokens: node identities (on by default) are refused with it (test/infra/node-identities.test.ts).
    expect(paths(await failure({ "llm-ha:kubernetesVersion": "1.29" }))).toEqual(["llm-ha:kubernetesVersion", "llm-ha:nodeIdentities"]);
    expect(paths(await failure({ "llm-ha:kubernetesVersion": "latest" }))).toEqual(["llm-ha:kubernetesVersion"]);
    expect(eksVersionProblem("1.34", "2026-12-02")).toBeUndefined();
    expect(eksVersionProblem("1.34", "2026-12-03")).toMatch(/extended support, at extra cost, until 2027-12-02/);
    expect(eksVersionProblem("1.35", "2026-11-30")).toBeUndefined();
    // Within 120 days of the end of standard support: warned (the program and preflight), never refused.
    expect(DEFAULT_EKS_VERSION).toBe("1.36");
    expect(kubernetesVersionCheck("1.35", "2026-11-26")).toBeUndefined();
    expect(kubernetesVersionCheck("1.35", "2026-12-05")).toEqual({ refuse: false, message: expect.stringMatching(/^EKS version 1.35 leaves standard support on 2027-03-27, in 112 days: .*upgrade to 1.36 \(llm-ha:kubernetesVersion\)$/) });
    expect(kubernetesVersionCheck("1.36", "2026-12-05")).toBeUndefined();
    expect(eksSupportEndingSoon("1.36", "2027-04-04")).toMatch(/leaves standard support on 2027-08-02, in 120 days/);
    // The table is ordered and each window is 14 months of standard support.
    for (const v of EKS_VERSIONS) expect(v.released < v.standardUntil && v.standardUntil < v.extendedUntil).toBe(true);
  });
});

describe("capacity settings that match AWS", () => {
  const gpu = (o: O) => ({ "llm-ha:gpuClasses": JSON.stringify([{ name: "h100", desiredPerAz: 1, maxPerAz: 2, ...o }]) });
  const lts = (rs: CapturedResource[]) => new Map(rs.filter((r) => r.type === "aws:ec2/launchTemplate:LaunchTemplate").map((r) => [r.name, r.props as O]));

  it("targets each AZ's own capacity reservation; an AZ without one launches On-Demand", async () => {
    const rs = await captureStack("dev", gpu({ instanceTypes: ["p5.48xlarge"], capacityReservations: { "us-east-1a": "cr-0123456789abcdef0" } }));
    const byName = lts(rs);
    expect(byName.get("gpu-us-east-1a-h100-lt")!.capacityReservationSpecification).toEqual({ capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } });
    expect(byName.get("gpu-us-east-1b-h100-lt")!.capacityReservationSpecification).toBeUndefined();
  });

  it("refuses the old single capacityReservationId, one reservation in two AZs, and a fallback list with a reservation", async () => {
    expect(paths(await failure(gpu({ capacityReservationId: "cr-0123456789abcdef0" })))).toEqual(["llm-ha:gpuClasses[0].capacityReservationId"]);
    const twice = await failure(gpu({ capacityReservations: { "us-east-1a": "cr-0123456789abcdef0", "us-east-1b": "cr-0123456789abcdef0" } }));
    expect(twice.message).toMatch(/listed for two AZs/);
    const list = await failure(gpu({ instanceTypes: ["p5.48xlarge", "p5e.48xlarge"], capacityReservations: { "us-east-1a": "cr-0123456789abcdef0" } }));
    expect(paths(list)).toEqual(["llm-ha:gpuClasses[0].instanceTypes"]);
    expect(paths(await failure(gpu({ capacityReservations: { "us-east-1z": "cr-0123456789abcdef0" } })))).toEqual(["llm-ha:gpuClasses[0].capacityReservations.us-east-1z"]);
  });

  it("passes a fallback list of instance types to the node group in order", async () => {
    const rs = await captureStack("dev", { "llm-ha:gpuClasses": JSON.stringify([{ name: "a100", instanceTypes: ["p4d.24xlarge", "p4de.24xlarge"] }]) });
    const groups = rs.filter((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && (r.props as O).amiType === "AL2023_x86_64_NVIDIA");
    for (const g of groups) expect((g.props as O).instanceTypes).toEqual(["p4d.24xlarge", "p4de.24xlarge"]);
  });

  it("CAPACITY_BLOCK: market type and instance type in the launch template, a block in every AZ", async () => {
    const crs = { "us-east-1a": "cr-0aaaaaaaaaaaaaaa1", "us-east-1b": "cr-0bbbbbbbbbbbbbbb2" };
    const rs = await captureStack("dev", gpu({ capacityType: "CAPACITY_BLOCK", capacityReservations: crs }));
    const byName = lts(rs);
    for (const [az, cr] of Object.entries(crs)) {
      expect(byName.get(`gpu-${az}-h100-lt`)).toMatchObject({
        instanceMarketOptions: { marketType: "capacity-block" },
        instanceType: "p5.48xlarge",
        capacityReservationSpecification: { capacityReservationTarget: { capacityReservationId: cr } },
      });
      const g = rs.find((r) => r.name === `gpu-${az}-h100`)!.props as O;
      expect(g.capacityType).toBe("CAPACITY_BLOCK");
      expect(g.instanceTypes).toBeUndefined();
    }
    // dev's standby AZ (us-east-1b) on a block is not parked: no scheduled action fights the block's end.
    expect(rs.filter((r) => r.type === "aws:autoscaling/schedule:Schedule").map((r) => r.name)).toEqual([]);
    const missing = await failure(gpu({ capacityType: "CAPACITY_BLOCK", capacityReservations: { "us-east-1a": "cr-0aaaaaaaaaaaaaaa1" } }));
    expect(missing.message).toMatch(/CAPACITY_BLOCK needs a capacity block reservation in every AZ; missing: us-east-1b/);
  });
});
