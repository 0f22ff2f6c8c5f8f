import { describe, expect, it } from "vitest";
import { eksVersionSupported, eksVersionSupportEnding, gpuCapacitySettings, nlbNeedsLbController } from "../../policies/deployability";
import { changed, find, happyStack, messages } from "./fixtures";
import type { CapturedResource } from "../../policies/runner";

const ON = (asOf: string) => ({ "eks-version-supported": { asOf } });

describe("eks-version-supported", () => {
  it("passes 1.36 in its standard support, with upgradePolicy STANDARD", async () => {
    expect(await messages(eksVersionSupported, happyStack(), ON("2026-11-30"))).toEqual([]);
  });

  it("fails 1.31 after its support ended, naming the dates and what is supported", async () => {
    const rs = changed("eks", (p) => (p.version = "1.31"));
    expect(await messages(eksVersionSupported, rs, ON("2026-11-30"))).toEqual([
      "EKS cluster eks: EKS version 1.31 left standard support on 2025-11-26 and extended support on 2026-11-26; in standard support on 2026-11-30: 1.34, 1.35, 1.36.",
    ]);
  });

  it("fails 1.34 from the day after its standard support, unless extended support is allowed", async () => {
    const rs = changed("eks", (p) => (p.version = "1.34"));
    expect(await messages(eksVersionSupported, rs, ON("2026-12-02"))).toEqual([]);
    expect(await messages(eksVersionSupported, rs, ON("2026-12-03"))).toEqual([
      "EKS cluster eks: EKS version 1.34 left standard support on 2026-12-02 (extended support, at extra cost, until 2027-12-02); in standard support on 2026-12-03: 1.35, 1.36.",
    ]);
    expect(await messages(eksVersionSupported, rs, { "eks-version-supported": { asOf: "2026-12-03", allowExtendedSupport: true } })).toEqual([]);
  });

  it("fails an unset version, an unknown one and a missing upgradePolicy", async () => {
    expect(await messages(eksVersionSupported, changed("eks", (p) => delete p.version), ON("2026-11-30"))).toEqual([
      "EKS cluster eks sets no version: EKS would pick its default, which no table here vouches for.",
    ]);
    expect((await messages(eksVersionSupported, changed("eks", (p) => (p.version = "1.40")), ON("2026-11-30")))[0]).toMatch(/is not in the support table/);
    expect(await messages(eksVersionSupported, changed("eks", (p) => delete p.upgradePolicy), ON("2026-11-30"))).toEqual([
      'EKS cluster eks has upgradePolicy.supportType unset (EKS defaults to EXTENDED); set "STANDARD".',
    ]);
  });
});

describe("eks-version-support-ending", () => {
  const ENDING = (asOf: string, warningDays?: number) => ({ "eks-version-support-ending": { asOf, ...(warningDays ? { warningDays } : {}) } });

  it("warns 1.35 within 120 days of its end of standard support (2027-03-27), naming the version to move to", async () => {
    const rs = changed("eks", (p) => (p.version = "1.35"));
    expect(await messages(eksVersionSupportEnding, rs, ENDING("2026-11-26"))).toEqual([]);
    expect(await messages(eksVersionSupportEnding, rs, ENDING("2026-12-05"))).toEqual([
      "EKS cluster eks: EKS version 1.35 leaves standard support on 2027-03-27, in 112 days: then EKS upgrades the control plane itself and the next `pulumi up` tries to take it back; upgrade to 1.36 (llm-ha:kubernetesVersion).",
    ]);
    expect(await messages(eksVersionSupportEnding, rs, ENDING("2026-12-05", 100))).toEqual([]);
  });

  it("stays quiet for the default 1.36 today, and leaves a version already out to eks-version-supported", async () => {
    expect(await messages(eksVersionSupportEnding, happyStack(), ENDING("2026-12-05"))).toEqual([]);
    expect(await messages(eksVersionSupportEnding, changed("eks", (p) => (p.version = "1.34")), ENDING("2026-12-05"))).toEqual([]);
  });
});

describe("gpu-capacity-settings", () => {
  const target = (cr: string) => ({ capacityReservationTarget: { capacityReservationId: cr } });

  it("passes the fixture stack and a reservation per AZ", async () => {
    expect(await messages(gpuCapacitySettings, happyStack())).toEqual([]);
    const rs = happyStack();
    find(rs, "gpu-us-east-1a-lt").props.capacityReservationSpecification = target("cr-0aaaaaaaaaaaaaaa1");
    find(rs, "gpu-us-east-1b-lt").props.capacityReservationSpecification = target("cr-0bbbbbbbbbbbbbbb2");
    expect(await messages(gpuCapacitySettings, rs)).toEqual([]);
  });

  it("fails one reservation targeted from two AZs", async () => {
    const rs = happyStack();
    find(rs, "gpu-us-east-1a-lt").props.capacityReservationSpecification = target("cr-0aaaaaaaaaaaaaaa1");
    find(rs, "gpu-us-east-1b-lt").props.capacityReservationSpecification = target("cr-0aaaaaaaaaaaaaaa1");
    expect(await messages(gpuCapacitySettings, rs)).toEqual([
      "Capacity reservation cr-0aaaaaaaaaaaaaaa1 is targeted from 2 AZs (us-east-1a, us-east-1b); a reservation belongs to one AZ, the others cannot launch.",
    ]);
  });

  it("fails a fallback list of instance types on a group that launches into a reservation", async () => {
    const rs = happyStack();
    find(rs, "gpu-us-east-1a-lt").props.capacityReservationSpecification = target("cr-0aaaaaaaaaaaaaaa1");
    find(rs, "gpu-us-east-1a-h100").props.instanceTypes = ["p5.48xlarge", "p4d.24xlarge"];
    expect(await messages(gpuCapacitySettings, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 launches into reservation cr-0aaaaaaaaaaaaaaa1 but lists 2 instance types (p5.48xlarge, p4d.24xlarge); a reservation is for one.",
    ]);
  });

  it("fails a CAPACITY_BLOCK group whose launch template lacks the market type, the block and the type", async () => {
    const rs = happyStack();
    const g = find(rs, "gpu-us-east-1a-h100").props;
    g.capacityType = "CAPACITY_BLOCK";
    expect(await messages(gpuCapacitySettings, rs)).toEqual([
      'CAPACITY_BLOCK GPU node group gpu-us-east-1a-h100 needs instanceMarketOptions.marketType "capacity-block", capacityReservationSpecification.capacityReservationTarget, instanceType, no instanceTypes on the node group (the launch template names it).',
    ]);
    delete g.instanceTypes;
    Object.assign(find(rs, "gpu-us-east-1a-lt").props, { instanceMarketOptions: { marketType: "capacity-block" }, instanceType: "p5.48xlarge", capacityReservationSpecification: target("cr-0aaaaaaaaaaaaaaa1") });
    expect(await messages(gpuCapacitySettings, rs)).toEqual([]);
  });
});

describe("nlb-needs-lb-controller", () => {
  const nlb: CapturedResource = {
    type: "kubernetes:core/v1:Service",
    name: "app-l1-us-east-1a-nlb",
    urn: "urn:pulumi:test::llm-ha::kubernetes:core/v1:Service::app-l1-us-east-1a-nlb",
    props: { apiVersion: "v1", kind: "Service", metadata: { name: "l1-us-east-1a" }, spec: { type: "LoadBalancer", loadBalancerClass: "service.k8s.aws/nlb" } },
  };
  const release = (version: string | undefined, roleArn?: string): CapturedResource => ({
    type: "kubernetes:helm.sh/v3:Release",
    name: "lbc-release",
    urn: "urn:pulumi:test::llm-ha::kubernetes:helm.sh/v3:Release::lbc-release",
    props: { chart: "aws-load-balancer-controller", version, values: { serviceAccount: { annotations: roleArn ? { "eks.amazonaws.com/role-arn": roleArn } : {} } } },
  });

  it("passes a stack without NLB Services, and one with the pinned controller", async () => {
    expect(await messages(nlbNeedsLbController, happyStack())).toEqual([]);
    expect(await messages(nlbNeedsLbController, [...happyStack(), nlb, release("1.14.0", "arn:aws:iam::1:role/lbc")])).toEqual([]);
  });

  it("fails NLB Services without the controller", async () => {
    expect(await messages(nlbNeedsLbController, [...happyStack(), nlb])).toEqual([
      "1 Service of class service.k8s.aws/nlb (app-l1-us-east-1a-nlb) but no Helm release of aws-load-balancer-controller in the stack: nothing would give them an NLB.",
    ]);
  });

  it("finds the controller by its checked archive's path as by its name", async () => {
    const archived = release(undefined, "arn:aws:iam::1:role/lbc");
    archived.props = { ...archived.props, chart: `/c/sha256-${"ab".repeat(32)}/aws-load-balancer-controller-3.5.0.tgz`, version: "3.5.0" };
    expect(await messages(nlbNeedsLbController, [...happyStack(), nlb, archived])).toEqual([]);
  });

  it("fails an unpinned chart and a controller without an IAM role", async () => {
    expect(await messages(nlbNeedsLbController, [...happyStack(), nlb, release(undefined, "arn:aws:iam::1:role/lbc")])).toEqual([
      "Helm release lbc-release of aws-load-balancer-controller has version unset; pin an exact chart version.",
    ]);
    expect(await messages(nlbNeedsLbController, [...happyStack(), nlb, release("1.14.0")])).toEqual([
      "Helm release lbc-release of aws-load-balancer-controller gives its ServiceAccount no IAM role (eks.amazonaws.com/role-arn): the controller could not call AWS.",
    ]);
  });
});
