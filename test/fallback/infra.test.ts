/**
 * infra/workloads/fallback.ts: the fallback container beside each L1 proxy, its MSK IAM
 * permissions (its cluster, topic and group; nothing on `*`) for its ServiceAccount only,
 * upstream keys as a Secret, and the L1 proxy rendered with the fallback backend only when asked.
 */
import * as pulumi from "@pulumi/pulumi";
import { Deployment as K8sDeployment } from "kubernetes-models/apps/v1";
import { NetworkPolicy as K8sNetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { ConfigMap as K8sConfigMap, Secret as K8sSecret, ServiceAccount as K8sServiceAccount } from "kubernetes-models/v1";
import { beforeAll, describe, expect, it } from "vitest";
import { checkHaproxyConfig } from "../../lab/engines/haproxy";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { loadContinueConfig } from "../../agent/src/edge/continuation/config";
import { podMonitors, scrapeConfigs } from "../../infra/observability/manifests";
import { CONTINUE_METRICS_PORT_NAME, CONTINUE_SCRAPE_JOB } from "../../infra/workloads/continuation-names";
import { L1_METRICS_LISTENERS, l1MetricsNetworkPolicy } from "../../infra/workloads/network-policies";
import { probeProblems } from "../../policies/create-time";
import {
  FALLBACK_METRICS_PORT, FALLBACK_METRICS_PORT_NAME, FALLBACK_SCRAPE_JOB,
  FallbackIam, fallbackMskPolicy, fallbackProviderObjects, fallbackServiceAccount, FALLBACK_MSK_ACTIONS, FALLBACK_SERVICE_ACCOUNT, mskResourceArn, FallbackArnError,
  type FallbackSidecarSpec,
} from "../../infra/workloads/fallback";
import { l1HaproxyConfig, l1ProxyManifests, type L1ProxySpec } from "../../infra/workloads/l1-proxy";

const CLUSTER_ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/llmha-prod/0a1b2c3d-4e5f-6789-abcd-ef0123456789-2";
const base: L1ProxySpec = {
  namespace: "llm-ha-edge", serversNamespace: "llm-ha", az: "eu-west-1a", azs: ["eu-west-1a", "eu-west-1b", "eu-west-1c"], slots: { "eu-west-1a": 4, "eu-west-1b": 4, "eu-west-1c": 2 },
  image: "haproxy:2.6", replicas: 2, publicSubnetId: "subnet-1", nlbName: "llmha-prod-a", tls: null,
  edge: { image: "123456789012.dkr.ecr.eu-west-1.amazonaws.com/llm-ha-agent:1", cluster: "prod", redisSecretName: "llmha-redis" },
};
const sidecar: FallbackSidecarSpec = {
  image: "123456789012.dkr.ecr.eu-west-1.amazonaws.com/llm-ha-agent:1", namespace: "llm-ha", cluster: "prod", region: "eu-west-1",
  kafkaBootstrap: "b-1.msk:9098,b-2.msk:9098,b-3.msk:9098", redisSecretName: "llmha-redis", models: ["llama-3-70b"],
  providers: [
    { name: "openai", url: "https://api.openai.com/v1", models: { "llama-3-70b": "gpt-4o-mini" }, key: "sk-PULUMI-SECRET" },
    { name: "local-other", url: "https://other.example/v1", models: { "*": "*" } },
  ],
};

describe("MSK IAM policy of the fallback's role", () => {
  it("grants its cluster, its topic and its group exactly, never `*`", () => {
    const doc = JSON.parse(fallbackMskPolicy(CLUSTER_ARN, "prod")) as { Statement: Array<{ Action: string[]; Resource: string }> };
    expect(doc.Statement).toEqual([
      { Sid: "Cluster", Effect: "Allow", Action: FALLBACK_MSK_ACTIONS.cluster, Resource: CLUSTER_ARN },
      { Sid: "QueueTopic", Effect: "Allow", Action: FALLBACK_MSK_ACTIONS.topic, Resource: "arn:aws:kafka:eu-west-1:123456789012:topic/llmha-prod/0a1b2c3d-4e5f-6789-abcd-ef0123456789-2/llmha.prod.requests" },
      { Sid: "ReplayGroup", Effect: "Allow", Action: FALLBACK_MSK_ACTIONS.group, Resource: "arn:aws:kafka:eu-west-1:123456789012:group/llmha-prod/0a1b2c3d-4e5f-6789-abcd-ef0123456789-2/llmha.prod.replay" },
    ]);
    expect(JSON.stringify(doc)).not.toContain('"*"');
    expect(() => mskResourceArn("arn:aws:s3:::bucket", "topic", "t")).toThrow(FallbackArnError);
  });
});

describe("the L1 proxy with and without the fallback", () => {
  it("renders exactly as before without it", () => {
    expect(JSON.stringify(l1ProxyManifests({ ...base, fallback: undefined }))).toBe(JSON.stringify(l1ProxyManifests(base)));
    expect(l1HaproxyConfig(base)).not.toContain("fallback");
    expect(JSON.stringify(l1ProxyManifests(base))).not.toContain("fallback");
  });

  it("adds the container, its ServiceAccount and volumes, and the nbsrv rule to HAProxy; every object validates", () => {
    const m = l1ProxyManifests({ ...base, fallback: sidecar });
    const cfg = (m.configMap.data as Record<string, string>)["haproxy.cfg"];
    expect(cfg).toContain("use_backend inference_fallback if { nbsrv(inference_servers) eq 0 }");
    expect(cfg).toContain("server fallback 127.0.0.1:9410 check");
    // Replays go through a loopback frontend without the edge (the fallback holds no client key), to the servers only.
    expect(cfg).toContain("frontend inference_internal\n  bind 127.0.0.1:8082\n");
    expect(cfg.slice(cfg.indexOf("frontend inference_internal")).split("\n\n")[0]).toContain("default_backend inference_servers");
    checkHaproxyConfig(cfg);
    new K8sDeployment(m.deployment as never).validate();
    const spec = (m.deployment as unknown as { spec: { template: { spec: { serviceAccountName: string; containers: Array<{ name: string; args: string[]; env: Array<{ name: string; value?: string }> }>; volumes: Array<{ name: string }> } } } }).spec.template.spec;
    expect(spec.serviceAccountName).toBe(FALLBACK_SERVICE_ACCOUNT);
    expect(spec.containers.map((c) => c.name)).toEqual(["haproxy", "edge-sync", "fallback", "continue"]);
    const fb = spec.containers[2];
    expect(fb.args).toEqual(["fallback"]);
    const env = Object.fromEntries(fb.env.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ LLMHA_KAFKA_AUTH: "msk-iam", LLMHA_KAFKA_REGION: "eu-west-1", LLMHA_FALLBACK_L1_URL: "http://127.0.0.1:8082", LLMHA_FALLBACK_PORT: "9410", LLMHA_CLUSTER: "prod" });
    expect(JSON.stringify(fb.env)).not.toContain("sk-PULUMI-SECRET");
    expect(spec.volumes.map((v) => v.name)).toEqual(["config", "run", "continue-sockets", "edge-map", "map-socket", "edge-redis", "fallback-providers", "fallback-redis", "fallback-keys"]);
  });

  it("keys come from a Secret (mounted files), providers.json names only their paths", async () => {
    const { configMap, secret } = fallbackProviderObjects(sidecar);
    new K8sConfigMap(configMap as never).validate();
    const providers = JSON.parse((configMap.data as Record<string, string>)["providers.json"]) as Array<{ name: string; keyFile?: string }>;
    expect(providers.map((p) => [p.name, p.keyFile])).toEqual([["openai", "/etc/llm-ha/provider-keys/openai"], ["local-other", undefined]]);
    expect(JSON.stringify(configMap)).not.toContain("sk-PULUMI-SECRET");
    const data = secret!.stringData as Record<string, pulumi.Output<string>>;
    expect(Object.keys(data)).toEqual(["openai"]);
    expect(pulumi.Output.isInstance(data.openai)).toBe(true);
    expect(await (data.openai as unknown as { isSecret: Promise<boolean> }).isSecret).toBe(true);
    new K8sSecret({ ...secret, stringData: { openai: "x" } } as never).validate();
    new K8sServiceAccount(fallbackServiceAccount("llm-ha", "arn:aws:iam::123456789012:role/x") as never).validate();
    expect(() => fallbackProviderObjects({ ...sidecar, providers: [sidecar.providers![0], sidecar.providers![0]] })).toThrow(/twice/);
  });
});

describe("the L1 pods' metrics listeners (the fallback's, the continuation relay's): port, scrape, NetworkPolicy", () => {
  type C = { name: string; env: Array<{ name: string; value?: string }>; ports: Array<{ name: string; containerPort: number }> };
  const fallbackOf = (m: ReturnType<typeof l1ProxyManifests>): C =>
    (m.deployment as unknown as { spec: { template: { spec: { containers: C[] } } } }).spec.template.spec.containers.find((c) => c.name === "fallback")!;

  it("the container names the metrics port and listens for it on the pod's address; the API stays on loopback", () => {
    const m = l1ProxyManifests({ ...base, fallback: sidecar });
    new K8sDeployment(m.deployment as never).validate();
    const fb = fallbackOf(m);
    expect(fb.ports).toContainEqual({ name: FALLBACK_METRICS_PORT_NAME, containerPort: FALLBACK_METRICS_PORT });
    expect(FALLBACK_METRICS_PORT_NAME.length).toBeLessThanOrEqual(15);
    const env = Object.fromEntries(fb.env.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ LLMHA_FALLBACK_HOST: "127.0.0.1", LLMHA_FALLBACK_PORT: "9410", LLMHA_FALLBACK_METRICS_ADDR: "0.0.0.0:9411" });
    // What the container is told is what the service reads.
    const cfg = loadFallbackConfig([], { LLMHA_FALLBACK_HOST: env.LLMHA_FALLBACK_HOST, LLMHA_FALLBACK_PORT: env.LLMHA_FALLBACK_PORT, LLMHA_FALLBACK_METRICS_ADDR: env.LLMHA_FALLBACK_METRICS_ADDR });
    expect(cfg.metricsAddr).toEqual({ host: "0.0.0.0", port: FALLBACK_METRICS_PORT });
    expect(cfg.host).toBe("127.0.0.1");
  });

  it("the relay names its metrics port and listens for it on the pod's address; it is HAProxy's SOCKS4 hop on loopback, and HAProxy's continuation listener a Unix socket only the two containers mount", () => {
    const m = l1ProxyManifests(base);
    new K8sDeployment(m.deployment as never).validate();
    const ct = (m.deployment as unknown as { spec: { template: { spec: { containers: C[] } } } }).spec.template.spec.containers.find((c) => c.name === "continue")!;
    expect(ct.ports).toEqual([{ name: CONTINUE_METRICS_PORT_NAME, containerPort: 9421 }]);
    expect(CONTINUE_METRICS_PORT_NAME.length).toBeLessThanOrEqual(15);
    const env = Object.fromEntries(ct.env.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ LLMHA_CONTINUE_HOST: "127.0.0.1", LLMHA_CONTINUE_PORT: "9420", LLMHA_CONTINUE_UPSTREAM: "unix@/var/run/llm-ha-continue/upstream.sock", LLMHA_CONTINUE_METRICS_ADDR: "0.0.0.0:9421" });
    expect(env.LLMHA_CONTINUE_SOCKET).toBeUndefined();
    // What the container is told is what the relay reads.
    const cfg = loadContinueConfig([], env);
    expect(cfg.metricsAddr).toEqual({ host: "0.0.0.0", port: 9421 });
    expect([cfg.host, cfg.port, cfg.socket]).toEqual(["127.0.0.1", 9420, null]);
    expect(cfg.upstream).toEqual({ path: "/var/run/llm-ha-continue/upstream.sock" });
    // HAProxy's side: the listener's socket in the one volume HAProxy's and the relay's containers
    // mount (no other container), and the relay on loopback as the relayed backend's SOCKS4 hop.
    const haproxy = (m.configMap.data as Record<string, string>)["haproxy.cfg"];
    expect(haproxy).toContain("bind unix@/var/run/llm-ha-continue/upstream.sock mode 666");
    expect(cfg.workers).toBe(1);
    expect(haproxy).toContain("server relay 127.0.0.1:9420 check");
    expect(haproxy).toMatch(/backend inference_relayed\n[^]*server-template [^\n]* socks4 127\.0\.0\.1:9420\n/);
    expect(haproxy).toMatch(/use_backend inference_relayed if METH_POST/);
    expect(haproxy).not.toMatch(/9422\b/);
    const pod = (m.deployment as unknown as { spec: { template: { spec: { containers: (C & { volumeMounts?: { name: string; mountPath: string }[] })[] } } } }).spec.template.spec;
    const mounting = pod.containers.filter((c) => (c.volumeMounts ?? []).some((v) => v.name === "continue-sockets")).map((c) => c.name);
    expect(mounting).toEqual(["haproxy", "continue"]);
    // The exec probes still reach the listener (0.0.0.0 includes the pod's 127.0.0.1), and the probes policy passes.
    expect(probeProblems(ct as never, false)).toEqual([]);
  });

  it("a scrape job of its own selects the L1 pods' metrics port (plain scrape_configs and PodMonitor)", () => {
    const jobs = scrapeConfigs({ namespace: "llm-ha", clusterName: "prod" }, []) as Array<{ job_name: string; relabel_configs: Array<Record<string, unknown>> }>;
    const job = jobs.find((j) => j.job_name === FALLBACK_SCRAPE_JOB)!;
    expect(job.relabel_configs.filter((r) => r.action === "keep").map((r) => r.regex)).toEqual(["l1-proxy", FALLBACK_METRICS_PORT_NAME]);
    expect(job.relabel_configs).toContainEqual({ target_label: "cluster", replacement: "prod" });
    // HAProxy's own job is unchanged: the fallback's series never land under job="l1-proxy" (its alerts count up{job="l1-proxy"}).
    expect(jobs.find((j) => j.job_name === "l1-proxy")!.relabel_configs.filter((r) => r.action === "keep").map((r) => r.regex)).toEqual(["l1-proxy", "monitor"]);
    expect(scrapeConfigs({ namespace: "llm-ha", clusterName: "prod" }, [], { fallback: false }).map((j) => j.job_name)).not.toContain(FALLBACK_SCRAPE_JOB);
    const pm = podMonitors({ namespace: "llm-ha", clusterName: "prod", selectorLabels: {} }, []).find((p) => p.metadata.name === FALLBACK_SCRAPE_JOB)!;
    const ep = (pm.spec.podMetricsEndpoints as Array<{ port: string; relabelings: unknown[] }>)[0];
    expect(pm.spec.jobLabel).toBeUndefined();
    expect(pm.spec.selector).toEqual({ matchLabels: { "app.kubernetes.io/name": "l1-proxy" } });
    // The monitor lives in the workloads namespace; the L1 pods are in the edge one.
    expect(pm.metadata.namespace).toBe("llm-ha");
    expect(pm.spec.namespaceSelector).toEqual({ matchNames: ["llm-ha-edge"] });
    expect(ep.port).toBe(FALLBACK_METRICS_PORT_NAME);
    expect(ep.relabelings[0]).toEqual({ targetLabel: "job", replacement: FALLBACK_SCRAPE_JOB });
  });

  it("the relay's scrape job selects its metrics port of the L1 pods, with or without the fallback", () => {
    for (const fallback of [true, false]) {
      const jobs = scrapeConfigs({ namespace: "llm-ha", clusterName: "prod" }, [], { fallback }) as Array<{ job_name: string; relabel_configs: Array<Record<string, unknown>>; kubernetes_sd_configs: unknown }>;
      const job = jobs.find((j) => j.job_name === CONTINUE_SCRAPE_JOB)!;
      expect(job, `fallback: ${fallback}`).toBeDefined();
      expect(job.relabel_configs.filter((r) => r.action === "keep").map((r) => r.regex)).toEqual(["l1-proxy", CONTINUE_METRICS_PORT_NAME]);
      expect(job.kubernetes_sd_configs).toEqual([{ role: "pod", namespaces: { names: ["llm-ha-edge"] } }]);
    }
    const pm = podMonitors({ namespace: "llm-ha", clusterName: "prod", selectorLabels: {} }, []).find((p) => p.metadata.name === CONTINUE_SCRAPE_JOB)!;
    const ep = (pm.spec.podMetricsEndpoints as Array<{ port: string; relabelings: unknown[] }>)[0];
    expect(pm.spec.selector).toEqual({ matchLabels: { "app.kubernetes.io/name": "l1-proxy" } });
    expect(pm.spec.namespaceSelector).toEqual({ matchNames: ["llm-ha-edge"] });
    expect(ep.port).toBe(CONTINUE_METRICS_PORT_NAME);
    expect(ep.relabelings[0]).toEqual({ targetLabel: "job", replacement: CONTINUE_SCRAPE_JOB });
  });

  it("the NetworkPolicy lets only the Prometheus namespace reach port 9411 of the L1 pods, and validates", () => {
    const np = l1MetricsNetworkPolicy("llm-ha", L1_METRICS_LISTENERS.fallback);
    expect(np.metadata).toEqual({ name: "llmha-fallback-metrics", namespace: "llm-ha", labels: { "app.kubernetes.io/name": "llm-ha-fallback", "app.kubernetes.io/part-of": "llm-ha" } });
    new K8sNetworkPolicy(np as never).validate();
    const spec = np.spec as { podSelector: unknown; policyTypes: string[]; ingress: Array<{ from: unknown[]; ports: unknown[] }> };
    expect(spec.podSelector).toEqual({ matchLabels: { "app.kubernetes.io/name": "l1-proxy" } });
    expect(spec.policyTypes).toEqual(["Ingress"]);
    expect(spec.ingress).toEqual([{ from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }], ports: [{ protocol: "TCP", port: 9411 }] }]);
    // No rule without `from` and nothing but the metrics port: neither the API (9410, loopback anyway) nor anything else.
    expect(JSON.stringify(spec.ingress)).not.toContain("9410");
    const other = l1MetricsNetworkPolicy("llm-ha", L1_METRICS_LISTENERS.fallback, "observability");
    new K8sNetworkPolicy(other as never).validate();
    expect(JSON.stringify(other.spec)).toContain('"kubernetes.io/metadata.name":"observability"');
    expect(() => l1MetricsNetworkPolicy("llm-ha", L1_METRICS_LISTENERS.fallback, "Bad_NS")).toThrow(/prometheusNamespace: must be a namespace name/);
  });

  it("the relay's NetworkPolicy (the same function) lets only the Prometheus namespace reach port 9421, not 9420 or 9422", () => {
    const np = l1MetricsNetworkPolicy("llm-ha-edge", L1_METRICS_LISTENERS.continuation);
    new K8sNetworkPolicy(np as never).validate();
    expect(np.metadata).toEqual({ name: "llmha-continue-metrics", namespace: "llm-ha-edge", labels: { "app.kubernetes.io/name": "llm-ha-continue", "app.kubernetes.io/part-of": "llm-ha" } });
    const spec = np.spec as { podSelector: unknown; policyTypes: string[]; ingress: unknown[] };
    expect(spec.podSelector).toEqual({ matchLabels: { "app.kubernetes.io/name": "l1-proxy" } });
    expect(spec.policyTypes).toEqual(["Ingress"]);
    expect(spec.ingress).toEqual([{ from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }], ports: [{ protocol: "TCP", port: 9421 }] }]);
    expect(JSON.stringify(spec)).not.toMatch(/942[02]/);
    expect(() => l1MetricsNetworkPolicy("llm-ha-edge", L1_METRICS_LISTENERS.continuation, "Bad_NS")).toThrow(/llmha-continue-metrics NetworkPolicy.*prometheusNamespace: must be a namespace name/s);
  });
});

describe("FallbackIam under Pulumi mocks", () => {
  const seen: Array<{ type: string; name: string; inputs: Record<string, unknown> }> = [];
  beforeAll(async () => {
    await pulumi.runtime.setMocks(
      {
        newResource: (a) => {
          seen.push({ type: a.type, name: a.name, inputs: a.inputs as Record<string, unknown> });
          return { id: `${a.name}-id`, state: { ...a.inputs, arn: `arn:aws:iam::123456789012:role/${a.name}` } };
        },
        call: () => ({}),
      },
      "llm-ha",
      "test",
      false,
    );
  });

  it("one role only the fallback's ServiceAccount can assume, one inline MSK policy", async () => {
    const iam = new FallbackIam("fb", {
      clusterName: "llmha-prod", cluster: "prod", mskClusterArn: CLUSTER_ARN, namespace: "llm-ha",
      oidcProviderArn: "arn:aws:iam::123456789012:oidc-provider/oidc.eks.eu-west-1.amazonaws.com/id/ABC", oidcProviderUrl: "https://oidc.eks.eu-west-1.amazonaws.com/id/ABC",
    });
    await new Promise((res) => iam.roleArn.apply(res));
    await new Promise((res) => setTimeout(res, 50));
    const role = seen.find((r) => r.type === "aws:iam/role:Role")!;
    const policy = seen.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy")!;
    expect(seen.filter((r) => r.type.startsWith("aws:"))).toHaveLength(2);
    expect(role.inputs.name).toBe("llmha-prod-fallback");
    expect(role.inputs.tags).toEqual({ "llm-ha.io/identity": "fallback", Project: "llm-ha", Environment: "test" });
    const trust = JSON.parse(role.inputs.assumeRolePolicy as string) as { Statement: Array<{ Condition: { StringEquals: Record<string, string> } }> };
    expect(trust.Statement[0].Condition.StringEquals["oidc.eks.eu-west-1.amazonaws.com/id/ABC:sub"]).toBe("system:serviceaccount:llm-ha:llmha-fallback");
    expect(policy.inputs.policy).toBe(fallbackMskPolicy(CLUSTER_ARN, "prod"));
  });
});
