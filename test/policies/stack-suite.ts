/**
 * The pack over one environment's stack, as `pulumi preview --policy-pack policies` would
 * run it: one test file per environment, because Pulumi's runtime state is process-global
 * and vitest forks per file.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { mandatory, runPolicies, type Violation } from "../../policies/runner";
import { TAGGABLE_TYPES } from "../../policies/tags";
import { captureStack, type CapturedResource, type Env } from "../../infra/capture";
import { settled } from "./fixtures";

// What the mandatory policies read; a stack without one of them would pass vacuously.
const COVERED = [
  "aws:eks/nodeGroup:NodeGroup",
  "aws:ec2/launchTemplate:LaunchTemplate",
  "aws:ec2/subnet:Subnet",
  "kubernetes:apps/v1:Deployment",
  "kubernetes:policy/v1:PodDisruptionBudget",
  "kubernetes:apps/v1:DaemonSet",
  "aws:route53/record:Record",
  "aws:route53/healthCheck:HealthCheck",
  "aws:elasticache/replicationGroup:ReplicationGroup",
  "aws:msk/cluster:Cluster",
  "aws:autoscaling/schedule:Schedule",
  "aws:ec2/securityGroup:SecurityGroup",
  "aws:eks/cluster:Cluster",
  "aws:iam/rolePolicy:RolePolicy",
  "kubernetes:helm.sh/v3:Release",
];

export function describeStackPolicies(env: Env): void {
  describe(`policy pack over the ${env} stack`, () => {
    let rs: CapturedResource[];
    let violations: Violation[];

    beforeAll(async () => {
      rs = await captureStack(env);
      violations = await runPolicies(policies, rs);
    });

    it("has every resource type the mandatory policies check", () => {
      const types = new Set(rs.map((r) => r.type));
      expect(COVERED.filter((t) => !types.has(t))).toEqual([]);
    });

    it("has zero mandatory violations", () => {
      expect(mandatory(violations)).toEqual([]);
    });

    // `npm run policy -- --stack <env>` is clean: advisory findings (a missing tag) count too.
    it("has zero violations of any level", () => {
      expect(violations.filter(settled).map((v) => `${v.enforcementLevel} ${v.policy}: ${v.message}`)).toEqual([]);
    });

    it("tags every taggable AWS resource with Project and Environment", () => {
      const untagged = rs
        .filter((r) => TAGGABLE_TYPES.has(r.type) || (r.type.startsWith("aws:") && "tags" in r.props))
        .filter((r) => {
          const tags = (r.props.tags ?? {}) as Record<string, unknown>;
          return tags.Project !== "llm-ha" || tags.Environment !== env;
        })
        .map((r) => `${r.type} ${r.name}`);
      expect(untagged).toEqual([]);
    });

    it("flags the stack once an NLB loses its certificate or a workload runs an image by tag", async () => {
      const broken = structuredClone(rs);
      const svc = broken.find((r) => r.type === "kubernetes:core/v1:Service" && (r.props.spec as { type?: string } | undefined)?.type === "LoadBalancer")!;
      const annotations = (svc.props.metadata as { annotations: Record<string, string> }).annotations;
      delete annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"];
      annotations["llm-ha.io/plain-http"] = env === "dev" ? "waived" : "";
      const dep = broken.find((r) => r.type === "kubernetes:apps/v1:Deployment")!;
      (dep.props.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0].image = "vllm/vllm-openai:v0.8.5";
      const found = mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn]);
      expect(found).toEqual(expect.arrayContaining([["images-by-digest", dep.urn]]));
      if (env !== "dev") expect(found).toEqual(expect.arrayContaining([["l1-tls-required", svc.urn]]));
    });

    // The chart as the stack named it before it was pinned by digest: by repository, name and version.
    it("flags the stack once the controller's chart is referenced by version only", async () => {
      const broken = structuredClone(rs);
      const release = broken.find((r) => r.type === "kubernetes:helm.sh/v3:Release")!;
      Object.assign(release.props, { chart: "aws-load-balancer-controller", repositoryOpts: { repo: "https://aws.github.io/eks-charts" } });
      expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn])).toEqual([["charts-by-digest", release.urn]]);
    });

    it("flags the stack once one of its health checks is slowed to threshold 3", async () => {
      const broken = structuredClone(rs);
      const hc = broken.find((r) => r.type === "aws:route53/healthCheck:HealthCheck");
      if (!hc) throw new Error("no health check captured");
      hc.props.failureThreshold = 3;
      expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn, v.message])).toEqual([
        ["route53-health-check-fast", hc.urn, `Health check ${hc.name} has failureThreshold 3; it must be at most 2.`],
      ]);
    });

    it("flags the stack once its EKS version is out of standard support or the controller is not installed", async () => {
      const old = structuredClone(rs);
      const cluster = old.find((r) => r.type === "aws:eks/cluster:Cluster")!;
      cluster.props.version = "1.31";
      // kube-proxy was resolved for the cluster's version (1.35); with only the cluster's version
      // changed in the graph, addon-versions-for-cluster sees the mismatch too.
      const kubeProxy = old.find((r) => r.type === "aws:eks/addon:Addon" && r.props.addonName === "kube-proxy")!;
      expect(mandatory(await runPolicies(policies, old)).map((v) => [v.policy, v.urn])).toEqual([
        ["eks-version-supported", cluster.urn],
        ["addon-versions-for-cluster", kubeProxy.urn],
      ]);
      const noLbc = rs.filter((r) => r.type !== "kubernetes:helm.sh/v3:Release");
      expect(mandatory(await runPolicies(policies, noLbc)).map((v) => v.policy)).toEqual(["nlb-needs-lb-controller"]);
    });

    it("flags the stack once one capacity reservation is targeted from two AZs", async () => {
      const broken = structuredClone(rs);
      // Two groups of a one-type class in different AZs (the first two AZs).
      const single = broken.filter((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && (r.props.instanceTypes as string[] | undefined)?.length === 1 && r.name.startsWith("gpu-"));
      const cls = single[0].name.split("-").pop();
      const names = single.filter((g) => g.name.endsWith(`-${cls}`)).slice(0, 2).map((g) => `${g.name}-lt`);
      for (const lt of broken.filter((r) => names.includes(r.name))) {
        lt.props.capacityReservationSpecification = { capacityReservationTarget: { capacityReservationId: "cr-0123456789abcdef0" } };
      }
      const found = mandatory(await runPolicies(policies, broken));
      expect(found.map((v) => v.policy)).toEqual(["gpu-capacity-settings"]);
      expect(found[0].message).toMatch(/^Capacity reservation cr-0123456789abcdef0 is targeted from 2 AZs/);
    });

    it("flags the stack once the agent's role may scale any group", async () => {
      const broken = structuredClone(rs);
      const rp = broken.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "agent-actuator");
      if (!rp) throw new Error("no agent role policy captured");
      const doc = JSON.parse(String(rp.props.policy)) as { Statement: { Resource: unknown }[] };
      doc.Statement[1].Resource = "*";
      rp.props.policy = JSON.stringify(doc);
      expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn, v.message])).toEqual([
        [
          "agent-role-least-privilege",
          rp.urn,
          `Agent role policy ${rp.name} allows autoscaling:UpdateAutoScalingGroup on Resource "*"; name the standby groups and load balancers.`,
        ],
      ]);
    });

    it("flags the stack once a role other than the fallback's may write the L4 queue topic", async () => {
      const broken = structuredClone(rs);
      const rp = broken.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "agent-actuator");
      const fb = broken.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy" && r.name === "fallback-msk");
      if (!rp || !fb) throw new Error("no agent or fallback role policy captured");
      const topic = (JSON.parse(String(fb.props.policy)) as { Statement: { Sid: string; Resource: string }[] }).Statement.find((s) => s.Sid === "QueueTopic")!.Resource;
      const doc = JSON.parse(String(rp.props.policy)) as { Statement: unknown[] };
      doc.Statement.push({ Effect: "Allow", Action: "kafka-cluster:WriteData", Resource: topic });
      rp.props.policy = JSON.stringify(doc);
      expect(mandatory(await runPolicies(policies, broken)).map((v) => [v.policy, v.urn])).toEqual([
        ["agent-role-least-privilege", rp.urn],
        ["msk-queue-writer-only-fallback", rp.urn],
      ]);
    });

    it("flags the stack once a standby schedule targets an active group", async () => {
      const broken = structuredClone(rs);
      const active = broken.find((r) => r.type === "aws:eks/nodeGroup:NodeGroup" && (r.props.labels as Record<string, string> | undefined)?.["llm-ha.io/az-role"] === "active");
      const down = broken.find((r) => r.type === "aws:autoscaling/schedule:Schedule" && r.props.desiredCapacity === 0);
      if (!active || !down) throw new Error("no active group or scale-down schedule captured");
      down.props.autoscalingGroupName = `eks-${active.name}-asg`;
      // The engine would record the group it came from as the property's dependency.
      down.opts.propertyDependencies = { ...down.opts.propertyDependencies, autoscalingGroupName: [active.urn] };
      const found = mandatory(await runPolicies(policies, broken)).map((v) => v.message);
      expect(found).toContain(`Schedule ${down.name} targets active GPU node group ${active.name}; only standby groups may be scheduled.`);
    });
  });
}
