/**
 * The invariants every environment's stack must keep, run by one test file per
 * environment (Pulumi's runtime state is process-global; vitest forks per file).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { GPU_CLASSES, isCron, S3_WEIGHTS_STACKS, type GpuClassName } from "../../infra/config";
import { l1HaproxyConfig } from "../../infra/workloads/l1-proxy";
import { INFERENCE_KEY_SECRET } from "../../infra/workloads";
import { fallbackMskPolicy, FALLBACK_SERVICE_ACCOUNT, type FallbackSidecarSpec } from "../../infra/workloads/fallback";
import { MODEL_CACHE_HOST_PATH, readinessCommand } from "../../infra/workloads/inference";
import { describeDeployability } from "./deployability-checks";
import { describeSchemas } from "./schema-checks";
import { describeNamespaces } from "./namespace-checks";
import { describeL1MetricsFence } from "./l1-metrics-checks";
import { describeNetworkRights } from "./network-rights-checks";
import { describeDataTier } from "./data-tier-checks";
import { expectObservability } from "../observability/stack-checks";
import { captureStack, ofType, stackConfig, type CapturedResource, type Env } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const matches = (selector: O, labels: O) => Object.entries(selector).every(([k, v]) => labels?.[k] === v);

export function describeStack(env: Env, expected: { resources: number }): void {
  describe(`${env} stack`, () => {
    let rs: CapturedResource[];
    const cfg = stackConfig(env);
    const json = (k: string): O => JSON.parse(cfg[`llm-ha:${k}`]) as O;
    const azs = json("azs") as unknown as string[];
    const standbyAz = cfg["llm-ha:standbyAz"];
    const classes = (json("gpuClasses") as unknown as O[]).map((c) => c.name as string);
    const props = (type: string) => ofType(rs, type).map((r) => r.props as O);
    const k8s = (kind: string) => rs.filter((r) => r.type.startsWith("kubernetes:") && (r.props as O).kind === kind).map((r) => r.props as O);

    beforeAll(async () => {
      rs = await captureStack(env);
    });

    it("registers every resource, each with a URN", () => {
      expect(rs).toHaveLength(expected.resources);
      for (const r of rs) expect(r.urn).toMatch(new RegExp(`^urn:pulumi:${env}::llm-ha::.*::${r.name}$`));
    });

    it("has a public and a private subnet per AZ and NAT per the environment", () => {
      const subnets = props("aws:ec2/subnet:Subnet");
      for (const az of azs) expect(subnets.filter((s) => s.availabilityZone === az)).toHaveLength(2);
      const nat = json("network").natGateways;
      expect(props("aws:ec2/natGateway:NatGateway")).toHaveLength(nat === "single" ? 1 : azs.length);
    });

    /** Classes whose standby gets a fallback group by default: the class's next type, unless its groups already launch it. */
    const fallbackClasses = () =>
      (json("gpuClasses") as unknown as O[]).filter((c) => GPU_CLASSES[c.name as GpuClassName].fallbackInstanceTypes.some((t) => !((c.instanceTypes as string[] | undefined) ?? []).includes(t)));
    const isFallback = (g: CapturedResource) => (g.props as O).labels?.["llm-ha.io/standby-fallback"] === "true";

    it("has one GPU node group per AZ and class, pinned by one subnet, tainted, labelled, IMDSv2 only", () => {
      const groups = ofType(rs, "aws:eks/nodeGroup:NodeGroup").filter((g) => (g.props as O).amiType === "AL2023_x86_64_NVIDIA" && !isFallback(g));
      expect(groups).toHaveLength(azs.length * classes.length);
      const lts = new Map(ofType(rs, "aws:ec2/launchTemplate:LaunchTemplate").map((r) => [`${r.name}-id`, r.props as O]));
      for (const az of azs) {
        for (const cls of classes) {
          const g = groups.find((x) => (x.props as O).labels["llm-ha.io/az"] === az && (x.props as O).labels["llm-ha.io/gpu-class"] === cls);
          expect(g, `${az} ${cls}`).toBeDefined();
          const p = g!.props as O;
          expect(p.subnetIds).toEqual([`net-private-${az}-id`]);
          expect(p.labels["llm-ha.io/az-role"]).toBe(az === standbyAz ? "standby" : "active");
          expect(p.taints).toContainEqual({ key: "nvidia.com/gpu", value: "true", effect: "NO_SCHEDULE" });
          expect(p.scalingConfig.minSize).toBe(0);
          // desiredSize is what the group runs (read from EKS), never the create-time input kept by ignoreChanges.
          expect(g!.opts.ignoreChanges).not.toContain("scalingConfig.desiredSize");
          expect(p.updateConfig).toEqual({ updateStrategy: "MINIMAL", maxUnavailable: 1 });
          expect(lts.get(p.launchTemplate.id)?.metadataOptions.httpTokens).toBe("required");
        }
      }
    });

    it("gives the standby AZ a fallback group per class with the class's next instance type: at zero, same labels, never scheduled", () => {
      const fallbacks = ofType(rs, "aws:eks/nodeGroup:NodeGroup").filter(isFallback);
      const expected = fallbackClasses();
      expect(fallbacks.map((g) => g.name).sort()).toEqual(expected.map((c) => `gpu-${standbyAz}-${c.name}-fallback`).sort());
      const lts = new Map(ofType(rs, "aws:ec2/launchTemplate:LaunchTemplate").map((r) => [`${r.name}-id`, r.props as O]));
      for (const c of expected) {
        const g = fallbacks.find((x) => x.name === `gpu-${standbyAz}-${c.name}-fallback`)!;
        const p = g.props as O;
        expect(p.instanceTypes).toEqual(GPU_CLASSES[c.name as GpuClassName].fallbackInstanceTypes);
        expect(p.subnetIds).toEqual([`net-private-${standbyAz}-id`]);
        // The agent DaemonSet and the inference Deployment select on class and AZ: they run there as on the standby group.
        expect(p.labels).toEqual({ "llm-ha.io/gpu-class": c.name, "llm-ha.io/az": standbyAz, "llm-ha.io/az-role": "standby", "llm-ha.io/standby-fallback": "true" });
        expect(p.capacityType).toBe("ON_DEMAND");
        expect(p.scalingConfig).toEqual({ minSize: 0, desiredSize: 0, maxSize: c.maxPerAz });
        expect(g.opts.ignoreChanges).not.toContain("scalingConfig.desiredSize");
        expect(lts.get(p.launchTemplate.id)?.metadataOptions.httpTokens).toBe("required");
      }
      for (const s of props("aws:autoscaling/schedule:Schedule")) expect(s.autoscalingGroupName).not.toMatch(/-fallback-/);
    });

    it("has one system node group per AZ, pinned by its subnet, at least one node each; the first keeps the old single group by alias", () => {
      const system = ofType(rs, "aws:eks/nodeGroup:NodeGroup").filter((g) => (g.props as O).labels?.["llm-ha.io/node-role"] === "system");
      expect(system.map((g) => g.name).sort()).toEqual(azs.map((az) => `eks-system-${az}`).sort());
      const total = json("systemNodes").desiredSize ?? azs.length;
      for (const [i, az] of azs.entries()) {
        const g = system.find((x) => x.name === `eks-system-${az}`)!;
        const p = g.props as O;
        expect(p.subnetIds).toEqual([`net-private-${az}-id`]);
        expect(p.scalingConfig.minSize).toBeGreaterThanOrEqual(1);
        expect(p.scalingConfig.minSize).toBe(p.scalingConfig.desiredSize);
        expect(p.scalingConfig.desiredSize).toBe(Math.max(1, Math.ceil(total / azs.length)));
        expect(g.opts.ignoreChanges).toEqual([]);
        expect(g.opts.aliases ?? []).toEqual(i === 0 ? ["eks-system"] : []);
      }
    });

    it("puts one inference pod per node, spread over zones, on its AZ's GPU nodes, with a PDB", () => {
      const deps = k8s("Deployment").filter((d) => d.metadata.labels["app.kubernetes.io/name"] === "inference");
      expect(deps).toHaveLength(azs.length * classes.length);
      const nodeLabels = props("aws:eks/nodeGroup:NodeGroup").map((g) => g.labels as O);
      for (const d of deps) {
        const pod = d.spec.template.spec;
        expect(pod.hostNetwork).toBe(true);
        const anti = pod.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution;
        expect(anti).toContainEqual({ topologyKey: "kubernetes.io/hostname", labelSelector: { matchLabels: { "app.kubernetes.io/name": "inference" } } });
        expect(pod.topologySpreadConstraints.map((t: O) => t.topologyKey)).toContain("topology.kubernetes.io/zone");
        expect(nodeLabels.some((l) => matches(pod.nodeSelector, l)), "nodeSelector matches a GPU node group").toBe(true);
        expect(pod.tolerations).toContainEqual({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
        const c = pod.containers[0];
        expect(Number(c.resources.limits["nvidia.com/gpu"])).toBeGreaterThan(0);
        // Readiness asks the node's agent, /health only when the agent is unreachable.
        expect(c.readinessProbe.exec.command).toEqual(readinessCommand());
        expect(c.startupProbe.httpGet).toEqual({ path: "/health", port: 8000 });
        expect(d.metadata.annotations["pulumi.com/skipAwait"]).toBe("true");
        // The model cache is on the node's instance-store NVMe, not an emptyDir.
        expect(pod.volumes.find((v: O) => v.name === "cache")).toEqual({ name: "cache", hostPath: { path: MODEL_CACHE_HOST_PATH, type: "DirectoryOrCreate" } });
        // The model reaches vLLM as its served name, or (the hub) through the pod's revision annotation
        // (`--model $(LLMHA_MODEL_SOURCE)`: a rollout changes the annotation, not the args).
        const served = c.args.includes(json("inference").model) || (c.args.includes("$(LLMHA_MODEL_SOURCE)") && d.spec.template.metadata.annotations["llm-ha.io/model-revision"] === json("inference").model);
        expect(served, `${JSON.stringify(c.args)} serves ${json("inference").model}`).toBe(true);
      }
    });

    it("gives every Deployment a PodDisruptionBudget", () => {
      const pdbs = k8s("PodDisruptionBudget");
      for (const d of k8s("Deployment")) {
        const pdb = pdbs.find((p) => p.metadata.namespace === d.metadata.namespace && matches(p.spec.selector.matchLabels, d.spec.template.metadata.labels));
        expect(pdb, d.metadata.name).toBeDefined();
      }
    });

    it("runs an agent on every GPU node with the contract's env and liveness only", () => {
      const agents = k8s("DaemonSet").filter((d) => d.metadata.labels["app.kubernetes.io/name"] === "llm-ha-agent");
      expect(agents).toHaveLength(azs.length * classes.length);
      for (const a of agents) {
        const pod = a.spec.template.spec;
        const c = pod.containers[0];
        const env = Object.fromEntries(c.env.map((e: O) => [e.name, e.value ?? e.valueFrom]));
        expect(env.LLMHA_AZ).toBe(pod.nodeSelector["llm-ha.io/az"]);
        expect(env.LLMHA_NODE_ID).toEqual({ fieldRef: { fieldPath: "spec.nodeName" } });
        // Redis: endpoint + password file, test/infra/redis-credentials.test.ts.
        expect(env.LLMHA_MODEL).toBe(json("inference").model);
        expect(pod.hostNetwork).toBe(true);
        expect(pod.tolerations).toContainEqual({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
        expect(c.livenessProbe.httpGet).toEqual({ path: "/livez", port: 9400 });
        expect(c.readinessProbe).toBeUndefined();
        expect(pod.securityContext.runAsNonRoot).toBe(true);
      }
      expect(k8s("DaemonSet").some((d) => d.metadata.name === "nvidia-device-plugin")).toBe(true);
    });

    it("renders each AZ's HAProxy from the generator: own nodes, other AZs as backup, behind its own NLB", () => {
      const slots = Object.fromEntries(azs.map((az) => [az, (json("gpuClasses") as unknown as O[]).reduce((n, c) => n + (c.maxPerAz as number), 0)]));
      for (const az of azs) {
        const cfgText = k8s("ConfigMap").find((c) => c.metadata.name === `l1-${az}`)?.data["haproxy.cfg"] as string;
        // With the L4 fallback's rule and backend (the generator only asks whether there is one).
        expect(cfgText).toBe(l1HaproxyConfig({ serversNamespace: "llm-ha", az, azs, slots, fallback: {} as FallbackSidecarSpec, edge: { upstreamKeySecretName: INFERENCE_KEY_SECRET } }));
        // The public frontend authenticates clients, and the servers get their own key.
        expect(cfgText).toMatch(/^\s*http-request return status 401 /m);
        expect(cfgText).toContain('http-request set-header authorization "Bearer ${LLMHA_INFERENCE_API_KEY}"');
        expect(cfgText).toContain("use_backend inference_fallback if { nbsrv(inference_servers) eq 0 }");
        // Both backends over the servers: straight, and through the continuation relay (its SOCKS4 hop).
        for (const backend of ["inference_servers", "inference_relayed"]) {
          const section = cfgText.split(`\nbackend ${backend}\n`)[1]?.split("\n\n")[0] ?? "";
          const lines = section.split("\n").filter((l) => l.includes("server-template") && l.includes(":8000"));
          expect(lines.filter((l) => !l.endsWith(" backup"))).toEqual([expect.stringContaining(`inference-${az}.llm-ha.svc.cluster.local:8000`)]);
          expect(lines.filter((l) => l.endsWith(" backup"))).toHaveLength(azs.length - 1);
          for (const l of lines) expect(l.includes(" socks4 127.0.0.1:9420")).toBe(backend === "inference_relayed");
        }
        // /az/health only on its own listener (what Route53 checks), healthy or not and nothing else.
        expect(cfgText).toContain("frontend inference_az_health\n");
        expect(cfgText).not.toContain("use_backend inference_az_health if { path /az/health }");
        const svc = k8s("Service").find((s) => s.metadata.name === `l1-${az}`)!;
        expect(svc.spec.type).toBe("LoadBalancer");
        expect(svc.metadata.annotations["service.beta.kubernetes.io/aws-load-balancer-subnets"]).toBe(`net-public-${az}-id`);
        const headless = k8s("Service").find((s) => s.metadata.name === `inference-${az}`)!;
        expect(headless.spec.clusterIP).toBe("None");
      }
    });

    for (const checks of [describeSchemas, describeDeployability, describeNamespaces, describeL1MetricsFence, describeNetworkRights, describeDataTier]) checks(env, () => rs);

    it("ships the alert rules, the Grafana dashboard and the scrape monitors", () => {
      expectObservability(rs, cfg["llm-ha:clusterName"] ?? `llm-ha-${env}`, cfg["llm-ha:standbyAz"] ?? null);
    });

    it("checks each AZ on /az/health every 10 s; the service name is one weighted record per AZ (its NLB, its check, its capacity) with TTL ≤ 30", () => {
      const checks = ofType(rs, "aws:route53/healthCheck:HealthCheck");
      expect(checks).toHaveLength(azs.length);
      for (const c of checks.map((x) => x.props as O)) {
        // HTTPS where the NLB's listeners are TLS (every stack but a dev one that waived it).
        expect(c).toMatchObject({ type: env === "dev" ? "HTTP" : "HTTPS", resourcePath: "/az/health", requestInterval: 10 });
        expect(c.failureThreshold).toBeLessThanOrEqual(2);
      }
      const records = props("aws:route53/record:Record");
      // No failover pair sends a lost AZ's whole share to one neighbour.
      expect(records.filter((r) => r.failoverRoutingPolicies?.length || r.aliases?.length)).toEqual([]);
      const weighted = records.filter((r) => r.weightedRoutingPolicies);
      expect(weighted).toHaveLength(azs.length);
      const gpus = classes.length ? (json("gpuClasses") as unknown as { desiredPerAz: number; gpusPerNode?: number }[]).reduce((n, c) => n + c.desiredPerAz * (c.gpusPerNode ?? 8), 0) : 0;
      for (const az of azs) {
        const r = weighted.find((x) => x.setIdentifier === az)!;
        expect(r.name).toBe(weighted[0].name);
        expect(r.records[0]).toContain(`l1-${az}-`);
        expect(r.healthCheckId).toBe(`dns-hc-${az}-id`);
        expect(r.ttl).toBeLessThanOrEqual(30);
        expect(r.weightedRoutingPolicies[0].weight).toBe(Math.min(255, gpus) || 1);
      }
    });

    it("schedules scale-to-zero on the standby AZ's node groups only", () => {
      const schedules = props("aws:autoscaling/schedule:Schedule");
      const sched = json("schedule");
      const perGroup = ["scaleDown", "scaleUp", "weekendDown"].filter((k) => sched[k] !== undefined).length;
      expect(schedules).toHaveLength(classes.length * perGroup);
      for (const s of schedules) {
        expect(s.autoscalingGroupName).toMatch(new RegExp(`^eks-gpu-${standbyAz}-`));
        expect(s.timeZone).toBe(sched.timeZone);
        expect(isCron(s.recurrence)).toBe(true);
        expect(s.minSize).toBe(0);
      }
      expect(schedules.some((s) => s.desiredCapacity === 0)).toBe(true);
      expect(schedules.some((s) => s.desiredCapacity > 0)).toBe(true);
    });

    it("logs the control plane and keeps the node role to the EKS-managed worker policies", () => {
      const [cluster] = props("aws:eks/cluster:Cluster");
      expect(cluster.enabledClusterLogTypes).toEqual(expect.arrayContaining(["api", "audit", "authenticator"]));
      expect(cluster.encryptionConfig.resources).toEqual(["secrets"]);
      // The stand-in apiEndpoint (infra/user-settings.ts): public, open to the listed CIDRs only.
      expect(cluster.vpcConfig).toMatchObject({ endpointPublicAccess: true, endpointPrivateAccess: true, publicAccessCidrs: ["198.51.100.0/24"] });
      const attached = props("aws:iam/rolePolicyAttachment:RolePolicyAttachment").map((a) => a.policyArn as string);
      expect(attached.filter((a) => !/^arn:aws:iam::aws:policy\/(AmazonEKS|AmazonEC2ContainerRegistryReadOnly|service-role\/AmazonEBSCSIDriverPolicy$)/.test(a))).toEqual([]);
      // The only inline policies: the agent's, the L4 fallback's and the load balancer controller's (IRSA), checked below,
      // the nodes' pull through the stack's ECR cache (create and import under <cluster>/* only), and the cluster role's
      // use of its Secrets key (envelope encryption), on that one key.
      // Where the weights come from S3 (prod), the inference pods' read-only role on that prefix too.
      const weights = S3_WEIGHTS_STACKS.includes(env) ? ["weights-read"] : [];
      expect(ofType(rs, "aws:iam/rolePolicy:RolePolicy").map((r) => r.name).sort()).toEqual(["agent-actuator", "eks-cluster-secrets-kms", "eks-gpu-node-pull", "eks-system-node-pull", "fallback-msk", "lbc-policy", ...weights].sort());
      const kms = JSON.parse(String(props("aws:iam/rolePolicy:RolePolicy").find((p) => String(p.policy).includes("SecretsEnvelopeEncryption"))!.policy));
      expect(kms.Statement).toEqual([expect.objectContaining({ Effect: "Allow", Action: ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"], Resource: cluster.encryptionConfig.provider.keyArn })]);
      const pull = JSON.parse(String(props("aws:iam/rolePolicy:RolePolicy").find((p) => String(p.policy).includes("PullThroughCache"))!.policy));
      expect(pull.Statement[0]).toMatchObject({ Action: ["ecr:CreateRepository", "ecr:BatchImportUpstreamImage"], Resource: `arn:aws:ecr:us-east-1:123456789012:repository/${cfg["llm-ha:clusterName"] ?? `llm-ha-${env}`}/*` });
    });

    it("runs the L4 fallback beside every L1 proxy, as its own IRSA role that only reaches its MSK topic and group", () => {
      const cluster = cfg["llm-ha:clusterName"] ?? `llm-ha-${env}`;
      const [msk] = ofType(rs, "aws:msk/cluster:Cluster");
      const mskArn = `arn:aws:kafka:us-east-1:123456789012:cluster/${msk.name}/0a1b2c3d-4e5f-6789-abcd-ef0123456789-1`;
      const role = ofType(rs, "aws:iam/role:Role").find((r) => r.name === "fallback-role")!.props as O;
      expect(role.name).toBe(`${cluster}-fallback`);
      expect(role.tags).toEqual({ "llm-ha.io/identity": "fallback", Project: "llm-ha", Environment: env });
      const issuer = "oidc.eks.us-east-1.amazonaws.com/id/eks-eks";
      expect(JSON.parse(role.assumeRolePolicy).Statement[0].Condition.StringEquals).toEqual({
        [`${issuer}:sub`]: `system:serviceaccount:llm-ha-edge:${FALLBACK_SERVICE_ACCOUNT}`,
        [`${issuer}:aud`]: "sts.amazonaws.com",
      });
      const policy = ofType(rs, "aws:iam/rolePolicy:RolePolicy").find((r) => r.name === "fallback-msk")!.props as O;
      expect(policy.policy).toBe(fallbackMskPolicy(mskArn, cluster));
      const sa = k8s("ServiceAccount").find((x) => x.metadata.name === FALLBACK_SERVICE_ACCOUNT)!;
      expect(sa.metadata.annotations["eks.amazonaws.com/role-arn"]).toBe(`arn:aws:iam:us-east-1:123456789012:fallback-role`);
      const providers = k8s("ConfigMap").find((x) => x.metadata.name === "llmha-fallback-providers")!;
      // The stack files name no external provider: cache and queue only.
      expect(JSON.parse(providers.data["providers.json"])).toEqual([]);
      expect(k8s("Secret").some((x) => x.metadata.name === "llmha-fallback-keys")).toBe(false);
      const l1 = k8s("Deployment").filter((d) => d.metadata.labels["app.kubernetes.io/name"] === "l1-proxy");
      expect(l1).toHaveLength(azs.length);
      for (const d of l1) {
        const pod = d.spec.template.spec;
        expect(pod.serviceAccountName).toBe(FALLBACK_SERVICE_ACCOUNT);
        expect(pod.containers.map((c: O) => c.name)).toEqual(["haproxy", "edge-sync", "fallback", "continue"]);
        const env = Object.fromEntries(pod.containers[2].env.map((e: O) => [e.name, e.value ?? e.valueFrom]));
        expect(env).toMatchObject({
          LLMHA_CLUSTER: cluster,
          LLMHA_KAFKA_BROKERS: `b-1.${msk.name}.kafka.amazonaws.com:9098,b-2.${msk.name}.kafka.amazonaws.com:9098`,
          LLMHA_KAFKA_AUTH: "msk-iam",
          LLMHA_KAFKA_REGION: "us-east-1",
          LLMHA_FALLBACK_MODELS: json("inference").model,
          // Its own Redis user (roles are the default).
          LLMHA_REDIS_URL: { secretKeyRef: { name: "llm-ha-redis-fallback", key: "endpoint" } },
          LLMHA_REDIS_PASSWORD_FILE: "/run/secrets/fallback-redis/password",
        });
        const dl1 = rs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.name === d.metadata.name)!;
        expect(dl1.opts.dependsOn.some((u) => u.endsWith("::app-fallback"))).toBe(true);
      }
    });

    it("lets only the controller's ServiceAccount act, only on the standby groups within their sizes and the stack's NLBs (IRSA, least privilege)", () => {
      const role = ofType(rs, "aws:iam/role:Role").find((r) => r.name === "agent-role")!.props as O;
      const trust = JSON.parse(role.assumeRolePolicy).Statement[0];
      const issuer = "oidc.eks.us-east-1.amazonaws.com/id/eks-eks";
      // Trusts the controller's ServiceAccount alone: a GPU node's agent cannot assume it.
      expect(trust).toEqual({
        Effect: "Allow",
        Principal: { Federated: "arn:aws:iam:us-east-1:123456789012:eks-oidc" },
        Action: "sts:AssumeRoleWithWebIdentity",
        Condition: { StringEquals: { [`${issuer}:sub`]: "system:serviceaccount:llm-ha-edge:llm-ha-controller", [`${issuer}:aud`]: "sts.amazonaws.com" } },
      });
      const policy = JSON.parse((ofType(rs, "aws:iam/rolePolicy:RolePolicy").find((r) => r.name === "agent-actuator")!.props as O).policy);
      // The standby groups and their fallback groups (a wake of a fallback must not be AccessDenied), nothing else.
      const arn = (group: string) => `arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/eks-${group}-asg`;
      const groups = [...classes.map((c) => `gpu-${standbyAz}-${c}`), ...fallbackClasses().map((c) => `gpu-${standbyAz}-${c.name}-fallback`)];
      const maxOf = (g: string) => (ofType(rs, "aws:eks/nodeGroup:NodeGroup").find((r) => r.name === g)!.props as O).scalingConfig.maxSize as number;
      const inCluster = { StringEquals: { "autoscaling:ResourceTag/eks:cluster-name": cfg["llm-ha:clusterName"] ?? `llm-ha-${env}` } };
      expect(policy.Statement).toEqual([
        { Sid: "ReadState", Effect: "Allow", Action: ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScheduledActions", "autoscaling:DescribeScalingActivities", "arc-zonal-shift:ListZonalShifts", "ec2:DescribeCapacityReservations"], Resource: "*" },
        // Each resize bounded by the group's own maximum (MinSize and MaxSize; desired cannot pass max).
        ...groups.map((g, i) => ({
          Sid: `ResizeStandbyGroup${i}`,
          Effect: "Allow",
          Action: ["autoscaling:UpdateAutoScalingGroup"],
          Resource: arn(g),
          Condition: { ...inCluster, NumericLessThanEquals: { "autoscaling:MaxSize": String(maxOf(g)), "autoscaling:MinSize": String(maxOf(g)) } },
        })),
        { Sid: "HoldStandbySchedule", Effect: "Allow", Action: ["autoscaling:SuspendProcesses", "autoscaling:ResumeProcesses"], Resource: groups.map(arn), Condition: inCluster },
        {
          Sid: "TagPreWakeSizes",
          Effect: "Allow",
          Action: ["autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"],
          Resource: groups.map(arn),
          Condition: { ...inCluster, "ForAllValues:StringEquals": { "aws:TagKeys": ["llm-ha:pre-wake"] } },
        },
      ]);
      // No write on a wildcard, no SetDesiredCapacity (it has no size key).
      for (const st of policy.Statement.slice(1)) expect(JSON.stringify(st.Resource)).not.toMatch(/"\*"/);
      expect(JSON.stringify(policy)).not.toContain("SetDesiredCapacity");
      const sa = k8s("ServiceAccount").find((x) => x.metadata.name === "llm-ha-controller")!;
      expect(sa.metadata).toMatchObject({ name: "llm-ha-controller", namespace: "llm-ha-edge", annotations: { "eks.amazonaws.com/role-arn": "arn:aws:iam:us-east-1:123456789012:agent-role" } });
      // No other ServiceAccount carries the role.
      expect(k8s("ServiceAccount").filter((x) => x.metadata.annotations?.["eks.amazonaws.com/role-arn"] === "arn:aws:iam:us-east-1:123456789012:agent-role")).toHaveLength(1);
      const ids: Record<string, string> = { "us-east-1a": "use1-az4", "us-east-1b": "use1-az6", "us-east-1c": "use1-az1" };
      // GPU-node agents: no ServiceAccount with a role (so no web identity token), no actuator, never lead. Their own
      // ServiceAccount only names their node-identity tokens: no role annotation, no binding (test/infra/node-identities.test.ts).
      const agentSa = k8s("ServiceAccount").find((x) => x.metadata.name === "llm-ha-agent")!;
      expect(agentSa.metadata.annotations?.["eks.amazonaws.com/role-arn"]).toBeUndefined();
      for (const a of k8s("DaemonSet").filter((d) => d.metadata.labels["app.kubernetes.io/name"] === "llm-ha-agent")) {
        const pod = a.spec.template.spec;
        expect(pod.serviceAccountName).toBe("llm-ha-agent");
        const nodeEnv = Object.fromEntries(pod.containers.flatMap((c: O) => c.env ?? []).map((e: O) => [e.name, e.value ?? e.valueFrom]));
        expect(nodeEnv.LLMHA_ROLE).toBe("node");
        for (const k of Object.keys(nodeEnv)) expect(k).not.toMatch(/^(AWS_|LLMHA_ACTUATOR|LLMHA_STANDBY_ASGS|LLMHA_SHIFT_RESOURCES|LLMHA_AZ_IDS)/);
      }
      // The controller: system nodes, one replica per AZ spread by zone, the role's ServiceAccount, the actuator's settings.
      const ctl = k8s("Deployment").find((d) => d.metadata.labels["app.kubernetes.io/name"] === "llm-ha-controller")!;
      expect(ctl.spec.replicas).toBe(azs.length);
      const pod = ctl.spec.template.spec;
      expect(pod.serviceAccountName).toBe("llm-ha-controller");
      expect(pod.nodeSelector).toEqual({ "llm-ha.io/node-role": "system" });
      expect(pod.tolerations ?? []).toEqual([]);
      expect(pod.topologySpreadConstraints).toEqual([expect.objectContaining({ topologyKey: "topology.kubernetes.io/zone", maxSkew: 1, whenUnsatisfiable: "DoNotSchedule" })]);
      const ctlEnv = Object.fromEntries(pod.containers[0].env.map((e: O) => [e.name, e.value ?? e.valueFrom]));
      expect(ctlEnv).toMatchObject({
        LLMHA_ROLE: "controller",
        LLMHA_ACTUATOR: "aws",
        LLMHA_AWS_REGION: "us-east-1",
        LLMHA_STANDBY_AZ: standbyAz,
        LLMHA_AZ_IDS: azs.map((az) => `${az}=${ids[az]}`).join(","),
        LLMHA_STANDBY_ASGS: (json("gpuClasses") as unknown as O[]).map((c) => `eks-gpu-${standbyAz}-${c.name}-asg=${Math.max(1, c.desiredPerAz as number)}`).join(","),
        // Each fallback group wakes to its standby group's size.
        LLMHA_STANDBY_FALLBACK: fallbackClasses().map((c) => `eks-gpu-${standbyAz}-${c.name}-fallback-asg=${Math.max(1, c.desiredPerAz as number)}`).join(","),
        // A weekly practice wake while the standby sleeps (Sunday 04:00 in the schedule's zone), 20 min budget.
        LLMHA_PRACTICE_WAKE: "0 4 * * 0",
        LLMHA_PRACTICE_WAKE_TZ: json("schedule").timeZone,
        LLMHA_PRACTICE_WAKE_BUDGET_MS: "1200000",
      });
      // Full redundancy in every stack file: the controller is not told otherwise.
      expect(ctlEnv.LLMHA_STANDBY_CAPACITY_PERCENT).toBeUndefined();
      // No zonal shift: the per-AZ NLBs are single-AZ, which ARC does not shift.
      expect(ctlEnv.LLMHA_SHIFT_RESOURCES).toBeUndefined();
      expect(ctlEnv.LLMHA_ZONAL_SHIFT).toBeUndefined();
      expect(k8s("PodDisruptionBudget").find((p) => p.metadata.name === "llm-ha-controller")?.spec).toMatchObject({ maxUnavailable: 1 });
    });
  });
}
