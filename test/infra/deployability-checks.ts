/**
 * What a fresh account needs of every environment's captured stack: the program installs what it
 * relies on (load balancer controller, managed add-ons), pins and supports its versions,
 * never waits on what cannot come up, and keeps tokens in Secrets. Called inside
 * `describeStack`, so each runs for dev, staging and prod.
 */
import { expect, it } from "vitest";
import { DEFAULT_EKS_VERSION, eksVersionProblem, isoDay } from "../../contracts/eks-versions";
import { ADDON_NAMES } from "../../infra/addons";
import { FAST_PULL_USER_DATA } from "../../infra/gpu-node-groups";
import { IMAGES } from "../../infra/images";
import { LB_CONTROLLER_CHART } from "../../infra/lb-controller";
import { verifiedArchivePath } from "../../contracts/charts";
import { mockAddonVersion, OFFLINE_CHART_ROOT, ofType, stackConfig, type CapturedResource, type Env } from "../../infra/capture";
import { GATED_MODEL_ORGS, S3_WEIGHTS_STACKS } from "../../infra/config";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

export function describeDeployability(env: Env, resources: () => CapturedResource[]): void {
  const k8s = (kind: string) => resources().filter((r) => r.type.startsWith("kubernetes:") && (r.props as O).kind === kind);
  const cfg = stackConfig(env);
  const model = String(JSON.parse(cfg["llm-ha:inference"]).model);

  it("installs the AWS Load Balancer Controller (IRSA, chart pinned by digest) and every NLB Service waits for it", () => {
    const [release] = ofType(resources(), "kubernetes:helm.sh/v3:Release");
    expect(release, "a Helm release of the controller").toBeDefined();
    const p = release.props as O;
    // The archive checked against the pinned digest, by path; no repository for Helm to download from.
    expect(p).toMatchObject({ chart: verifiedArchivePath(OFFLINE_CHART_ROOT, LB_CONTROLLER_CHART.digest, "aws-load-balancer-controller-3.5.0.tgz"), version: LB_CONTROLLER_CHART.version, namespace: "kube-system" });
    expect(p.repositoryOpts).toBeUndefined();
    // A current chart (3.x, whose version is the controller's), running that release's image.
    expect(Number(LB_CONTROLLER_CHART.version.split(".")[0])).toBeGreaterThanOrEqual(3);
    expect(IMAGES.lbController.tag).toBe(`v${LB_CONTROLLER_CHART.version}`);
    expect(p.values).toMatchObject({ clusterName: `llm-ha-${env}`, region: "us-east-1", vpcId: "net-vpc-id" });
    expect(p.values.serviceAccount.annotations["eks.amazonaws.com/role-arn"]).toBe("arn:aws:iam:us-east-1:123456789012:lbc-role");
    const role = ofType(resources(), "aws:iam/role:Role").find((r) => r.name === "lbc-role")!.props as O;
    const trust = JSON.parse(role.assumeRolePolicy).Statement[0];
    expect(trust.Condition.StringEquals["oidc.eks.us-east-1.amazonaws.com/id/eks-eks:sub"]).toBe("system:serviceaccount:kube-system:aws-load-balancer-controller");
    const policy = JSON.parse((ofType(resources(), "aws:iam/rolePolicy:RolePolicy").find((r) => r.name === "lbc-policy")!.props as O).policy);
    const actions = policy.Statement.flatMap((s: O) => s.Action as string[]);
    expect(actions).toEqual(expect.arrayContaining(["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:RegisterTargets", "ec2:DescribeSubnets"]));
    // Writes on load balancers are scoped to the controller's own tag.
    const change = policy.Statement.find((s: O) => s.Sid === "ChangeOwnLoadBalancers");
    expect(change.Condition).toEqual({ Null: { "aws:ResourceTag/elbv2.k8s.aws/cluster": "false" } });

    const nlbs = k8s("Service").filter((s) => (s.props as O).spec.type === "LoadBalancer");
    expect(nlbs.length).toBeGreaterThanOrEqual(2);
    for (const s of nlbs) {
      expect(s.opts.dependsOn, s.name).toContain(release.urn);
      expect(s.opts.customTimeouts, s.name).toMatchObject({ create: "20m" });
    }
    expect(release.opts.customTimeouts).toMatchObject({ create: "15m" });
  });

  it("runs an EKS version in standard support today, with upgradePolicy STANDARD", () => {
    const [cluster] = ofType(resources(), "aws:eks/cluster:Cluster").map((r) => r.props as O);
    expect(cluster.version).toBe(cfg["llm-ha:kubernetesVersion"] ?? DEFAULT_EKS_VERSION);
    expect(eksVersionProblem(cluster.version, isoDay(new Date()))).toBeUndefined();
    expect(cluster.upgradePolicy).toEqual({ supportType: "STANDARD" });
  });

  it("installs the managed add-ons at versions resolved for the cluster's version, with vpc-cni enforcing NetworkPolicy", () => {
    const addons = ofType(resources(), "aws:eks/addon:Addon").map((r) => r.props as O);
    expect(addons.map((a) => a.addonName).sort()).toEqual([...ADDON_NAMES].sort());
    // The mock answers getAddonVersion with a version naming what it was asked for: each
    // add-on's version was resolved for this cluster's Kubernetes version, none pinned.
    const [eks] = ofType(resources(), "aws:eks/cluster:Cluster").map((r) => r.props as O);
    for (const a of addons) expect(a.addonVersion, a.addonName).toBe(mockAddonVersion(a.addonName, eks.version));
    const cni = addons.find((a) => a.addonName === "vpc-cni")!;
    expect(JSON.parse(cni.configurationValues).enableNetworkPolicy).toBe("true");
    expect(addons.find((a) => a.addonName === "aws-ebs-csi-driver")!.serviceAccountRoleArn).toBe("arn:aws:iam:us-east-1:123456789012:eks-addon-ebs-csi");
    // The system nodes join after the network add-ons exist.
    const system = ofType(resources(), "aws:eks/nodeGroup:NodeGroup").filter((g) => g.name.startsWith("eks-system-"));
    const vpcCni = ofType(resources(), "aws:eks/addon:Addon").find((r) => (r.props as O).addonName === "vpc-cni")!;
    expect(system.length).toBeGreaterThan(1);
    for (const g of system) expect(g.opts.dependsOn).toContain(vpcCni.urn);
  });

  it("keeps the agent image in the stack's ECR repository and runs it by digest", () => {
    const [repo] = ofType(resources(), "aws:ecr/repository:Repository").map((r) => r.props as O);
    expect(repo).toMatchObject({ name: `llm-ha-${env}/agent`, imageScanningConfiguration: { scanOnPush: true } });
    for (const a of k8s("DaemonSet").filter((d) => (d.props as O).metadata.labels["app.kubernetes.io/name"] === "llm-ha-agent")) {
      const p = a.props as O;
      expect(p.spec.template.spec.containers[0].image).toMatch(/@sha256:[0-9a-f]{64}$/);
      expect(p.metadata.annotations["pulumi.com/skipAwait"]).toBe("true");
    }
  });

  it("passes a Hugging Face token for a gated model through a Secret, as a file of the model fetcher alone", () => {
    const gated = GATED_MODEL_ORGS.includes(model.split("/")[0]);
    const secret = k8s("Secret").find((s) => (s.props as O).metadata.name === "llm-ha-hf-token");
    // Prod loads the model from its S3 copy: no token there, gated model or not.
    expect(secret !== undefined).toBe(gated && !S3_WEIGHTS_STACKS.includes(env));
    for (const d of k8s("Deployment").filter((x) => (x.props as O).metadata.labels["app.kubernetes.io/name"] === "inference")) {
      const pod = (d.props as O).spec.template.spec;
      // No container has the token in its environment; only the model fetcher mounts it, as a file.
      for (const c of [...pod.initContainers, ...pod.containers] as O[]) {
        expect((c.env ?? []).map((e: O) => e.name)).not.toContain("HF_TOKEN");
        expect(JSON.stringify(c.env ?? [])).not.toContain("hf_");
      }
      const holders = ([...pod.initContainers, ...pod.containers] as O[]).filter((c) => (c.volumeMounts ?? []).some((m: O) => m.name === "hf-token")).map((c) => c.name);
      const fetchesFromHub = pod.initContainers.some((c: O) => c.name === "model");
      expect(holders).toEqual(gated && fetchesFromHub ? ["model"] : []);
      if (gated && fetchesFromHub) expect(pod.volumes).toContainEqual({ name: "hf-token", secret: { secretName: "llm-ha-hf-token", defaultMode: 0o440 } });
    }
  });

  it("puts the GPU nodes' instance-store NVMe in RAID0, turns on fast image pull on a 1,000 MiB/s root volume, and drops EFA", () => {
    // The GPU groups' templates (the system group's sets IMDS only).
    const lts = ofType(resources(), "aws:ec2/launchTemplate:LaunchTemplate").filter((r) => r.name.startsWith("gpu-")).map((r) => r.props as O);
    expect(lts.length).toBeGreaterThan(0);
    for (const lt of lts) {
      // Every stack keeps the default, llm-ha:gpuFastImagePull true: the gate and the volume it needs.
      expect(Buffer.from(lt.userData, "base64").toString()).toBe(FAST_PULL_USER_DATA);
      expect(lt.blockDeviceMappings).toEqual([
        { deviceName: "/dev/xvda", ebs: { volumeSize: 500, volumeType: "gp3", throughput: 1000, iops: 16000, encrypted: "true", deleteOnTermination: "true" } },
      ]);
      expect(lt.networkInterfaces).toBeUndefined();
    }
    expect(FAST_PULL_USER_DATA).toContain("strategy: RAID0");
    expect(FAST_PULL_USER_DATA).toContain("spec:\n  featureGates:\n    FastImagePull: true\n  instance:\n");
  });
}
