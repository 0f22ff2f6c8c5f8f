/**
 * `llm-ha:fallback` in the stack: upstreams in order of priority, model mapping,
 * keys from stack secrets (a Secret mounted as files, never in providers.json or an env var),
 * every bad setting named by its key; `enabled: false` leaves the L1 proxies as before.
 */
import { parse as parseYaml } from "yaml";
import * as pulumi from "@pulumi/pulumi";
import { Deployment } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { ConfigMap, Secret } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import { captureStack, type CapturedResource } from "../../infra/capture";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const MODEL = "Qwen/Qwen2.5-7B-Instruct"; // Pulumi.dev.yaml's
const KEY = "sk-test-FALLBACK-KEY-0123456789";
const providers = [
  { name: "openai", url: "https://api.openai.com/v1/", timeoutMs: 8000, models: { [MODEL]: "gpt-4o-mini" }, keySecret: "fallbackKeyOpenai" },
  { name: "together", url: "https://api.together.xyz/v1", models: { "*": "*" } },
];

async function failure(overrides: Record<string, string>): Promise<pulumi.InputPropertiesError> {
  const err: unknown = await captureStack("dev", overrides).then(() => undefined, (e: unknown) => e);
  expect(pulumi.InputPropertiesError.isInstance(err), String(err)).toBe(true);
  return err as pulumi.InputPropertiesError;
}
const paths = (e: pulumi.InputPropertiesError) => e.errors.map((x) => x.propertyPath);
const k8s = (rs: CapturedResource[], kind: string, name: string) => rs.find((r) => r.type.startsWith("kubernetes:") && (r.props as O).kind === kind && (r.props as O).metadata.name === name)?.props as O | undefined;

describe("llm-ha:fallback in the stack", () => {
  it("writes the providers in order with their mapping, the keys into a Secret mounted as files, nowhere else", async () => {
    const rs = await captureStack("dev", {
      "llm-ha:fallback": JSON.stringify({ providers, maxQueueDepth: 5000, replayRps: 3 }),
      "llm-ha:fallbackKeyOpenai": KEY,
    });
    const cm = k8s(rs, "ConfigMap", "llmha-fallback-providers")!;
    new ConfigMap(cm).validate();
    expect(JSON.parse(cm.data["providers.json"])).toEqual([
      { name: "openai", url: "https://api.openai.com/v1", priority: 0, timeoutMs: 8000, models: { [MODEL]: "gpt-4o-mini" }, keyFile: "/etc/llm-ha/provider-keys/openai" },
      { name: "together", url: "https://api.together.xyz/v1", priority: 1, timeoutMs: 10000, models: { "*": "*" } },
    ]);
    const secret = k8s(rs, "Secret", "llmha-fallback-keys")!;
    new Secret(secret).validate();
    expect(secret.stringData).toEqual({ openai: KEY });
    // The key is in that Secret and nowhere else in the stack.
    const elsewhere = rs.filter((r) => r.props !== secret && JSON.stringify(r.props).includes(KEY)).map((r) => `${r.type} ${r.name}`);
    expect(elsewhere).toEqual([]);
    const l1 = rs.filter((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === "l1-proxy");
    expect(l1).toHaveLength(2);
    for (const d of l1) {
      new Deployment(d.props as O).validate();
      const pod = (d.props as O).spec.template.spec;
      const fb = pod.containers.find((c: O) => c.name === "fallback");
      expect(fb.volumeMounts).toContainEqual({ name: "fallback-keys", mountPath: "/etc/llm-ha/provider-keys", readOnly: true });
      expect(pod.volumes).toContainEqual({ name: "fallback-keys", secret: { secretName: "llmha-fallback-keys", defaultMode: 0o440 } });
      const env = Object.fromEntries(fb.env.map((e: O) => [e.name, e.value]));
      expect(env).toMatchObject({ LLMHA_FALLBACK_MAX_QUEUE_DEPTH: "5000", LLMHA_FALLBACK_REPLAY_RPS: "3", LLMHA_FALLBACK_MODELS: MODEL });
      expect(d.opts.dependsOn.some((u) => u.endsWith("::app-fallback-keys"))).toBe(true);
    }
  });

  it("its metrics: the L1 pods' fallback container names port 9411, a scrape job selects it, and only the Prometheus namespace may reach it", async () => {
    const rs = await captureStack("dev");
    const np = k8s(rs, "NetworkPolicy", "llmha-fallback-metrics")!;
    new NetworkPolicy(np).validate();
    expect(np.spec.ingress).toEqual([{ from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }], ports: [{ protocol: "TCP", port: 9411 }] }]);
    // No other policy opens 9411 (NetworkPolicies add up).
    const others = rs.filter((r) => (r.props as O).kind === "NetworkPolicy" && r.props !== np).map((r) => JSON.stringify((r.props as O).spec));
    expect(others.length).toBeGreaterThan(0);
    for (const o of others) expect(o).not.toContain("9411");
    const jobs = parseYaml(k8s(rs, "ConfigMap", "llm-ha-scrape-configs")!.data["scrape-configs.yml"]).scrape_configs as O[];
    const job = jobs.find((j) => j.job_name === "llm-ha-fallback")!;
    const [app, port] = job.relabel_configs.filter((r: O) => r.action === "keep").map((r: O) => r.regex);
    const l1 = rs.filter((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === app);
    expect(l1.length).toBeGreaterThan(0);
    for (const d of l1) {
      const pod = (d.props as O).spec.template.spec;
      // The policy selects these very pods.
      expect((d.props as O).spec.template.metadata.labels).toMatchObject(np.spec.podSelector.matchLabels);
      const fb = pod.containers.find((c: O) => c.name === "fallback");
      expect(fb.ports).toContainEqual({ name: port, containerPort: 9411 });
      expect(fb.env).toContainEqual({ name: "LLMHA_FALLBACK_METRICS_ADDR", value: "0.0.0.0:9411" });
      expect(fb.env).toContainEqual({ name: "LLMHA_FALLBACK_HOST", value: "127.0.0.1" });
    }
  });

  it("the continuation relay's metrics likewise: port 9421 named in every L1 pod, its own scrape job, only the Prometheus namespace let in — with or without the fallback", async () => {
    for (const rs of [await captureStack("dev"), await captureStack("dev", { "llm-ha:fallback": JSON.stringify({ enabled: false }) })]) {
      const np = k8s(rs, "NetworkPolicy", "llmha-continue-metrics")!;
      new NetworkPolicy(np).validate();
      expect(np.metadata.namespace).toBe("llm-ha-edge");
      expect(np.spec.ingress).toEqual([{ from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }], ports: [{ protocol: "TCP", port: 9421 }] }]);
      const others = rs.filter((r) => (r.props as O).kind === "NetworkPolicy" && r.props !== np).map((r) => JSON.stringify((r.props as O).spec));
      for (const o of others) expect(o).not.toMatch(/942[0-2]/);
      const jobs = parseYaml(k8s(rs, "ConfigMap", "llm-ha-scrape-configs")!.data["scrape-configs.yml"]).scrape_configs as O[];
      const [app, port] = jobs.find((j) => j.job_name === "llm-ha-continue")!.relabel_configs.filter((r: O) => r.action === "keep").map((r: O) => r.regex);
      const l1 = rs.filter((r) => r.type === "kubernetes:apps/v1:Deployment" && (r.props as O).metadata.labels["app.kubernetes.io/name"] === app);
      expect(l1.length).toBeGreaterThan(0);
      for (const d of l1) {
        expect((d.props as O).spec.template.metadata.labels).toMatchObject(np.spec.podSelector.matchLabels);
        const ct = (d.props as O).spec.template.spec.containers.find((c: O) => c.name === "continue");
        expect(ct.ports).toContainEqual({ name: port, containerPort: 9421 });
        expect(ct.env).toContainEqual({ name: "LLMHA_CONTINUE_METRICS_ADDR", value: "0.0.0.0:9421" });
        expect(ct.env).toContainEqual({ name: "LLMHA_CONTINUE_PORT", value: "9420" });
      }
    }
  });

  it("enabled: false leaves no fallback: no role, no container, no nbsrv rule", async () => {
    const rs = await captureStack("dev", { "llm-ha:fallback": JSON.stringify({ enabled: false }) });
    // (The standby's capacity fallback groups, `gpu-<az>-<class>-fallback`, are another thing.)
    // (Nor is the Redis role llmha-fallback's ElastiCache user: every role of contracts/redis-roles.ts has one.)
    expect(rs.filter((r) => /fallback/.test(r.name) && !r.name.startsWith("gpu-") && !r.name.startsWith("redis-user-")).map((r) => r.name)).toEqual([]);
    const cfg = k8s(rs, "ConfigMap", "l1-us-east-1a")!.data["haproxy.cfg"] as string;
    expect(cfg).not.toContain("fallback");
  });

  it("names every bad setting by its key, in one error", async () => {
    const e = await failure({
      "llm-ha:fallback": JSON.stringify({
        enabld: true,
        replayRps: 0,
        providers: [
          { name: "openai", url: "http://api.openai.com/v1", models: { "llama-3": "gpt-4o" }, keySecret: "fallbackKeyOpenai" },
          { name: "openai", url: "https://x.example/v1", models: {}, key: "sk-in-clear", timeoutMs: 5 },
          { name: "bad name", url: "not a url", models: { "*": "*" } },
        ],
      }),
    });
    expect(paths(e).sort()).toEqual([
      "llm-ha:fallback.enabld",
      "llm-ha:fallback.providers[0].models.llama-3",
      "llm-ha:fallback.providers[0].url",
      "llm-ha:fallback.providers[1].key",
      "llm-ha:fallback.providers[1].models",
      "llm-ha:fallback.providers[1].name",
      "llm-ha:fallback.providers[1].timeoutMs",
      "llm-ha:fallback.providers[2].name",
      "llm-ha:fallback.providers[2].url",
      "llm-ha:fallback.replayRps",
      "llm-ha:fallbackKeyOpenai",
    ]);
    expect(e.message).toContain("llm-ha:fallbackKeyOpenai: is required by llm-ha:fallback.providers[0].keySecret: pulumi config set --secret llm-ha:fallbackKeyOpenai");
    expect(e.message).toContain("llm-ha:fallback.providers[0].url: http://api.openai.com/v1 must be https");
    expect(e.message).toContain("llm-ha:fallback.providers[1].key: a provider key never goes in the stack file in clear");
    expect(e.message).not.toContain("sk-in-clear");
    expect(e.message).toContain(`llm-ha:fallback.providers[0].models.llama-3: is not a served model (llm-ha:fallback.models: ${MODEL})`);
    expect(paths(await failure({ "llm-ha:fallback": JSON.stringify([]) }))).toEqual(["llm-ha:fallback"]);
  });
});
