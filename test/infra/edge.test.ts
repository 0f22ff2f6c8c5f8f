/**
 * The public edge at the infrastructure: TLS on the NLBs (dev may waive it, nobody else), Route53's
 * checks over HTTPS, every image by digest through the stack's pull-through cache, vLLM with
 * its API key from a Secret and the agents reading it from a file.
 */
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { cachePath, IMAGES, pullRef, splitDigestRef } from "../../infra/images";
import { chartImageValues } from "../../infra/lb-controller";
import { l1ProxyManifests, type L1ProxySpec } from "../../infra/workloads/l1-proxy";
import { stackFailure } from "./stack-failure";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const LB = "service.beta.kubernetes.io/aws-load-balancer";
const CERT = "arn:aws:acm:us-east-1:111122223333:certificate/6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0";
const spec: L1ProxySpec = {
  namespace: "llm-ha-edge", serversNamespace: "llm-ha", az: "us-east-1a", azs: ["us-east-1a", "us-east-1b"], slots: { "us-east-1a": 2, "us-east-1b": 2 },
  image: `haproxy@sha256:${"ab".repeat(32)}`, replicas: 2, publicSubnetId: "subnet-1", nlbName: "l1-a",
  tls: { certificateArn: CERT, sslPolicy: "ELBSecurityPolicy-TLS13-1-2-2021-06" },
  edge: { image: `agent@sha256:${"cd".repeat(32)}`, cluster: "prod", redisSecretName: "llm-ha-redis" },
};
const paths = (e: pulumi.InputPropertiesError) => e.errors.map((x) => x.propertyPath);
const of = (rs: CapturedResource[], type: string) => rs.filter((r) => r.type === type).map((r) => r.props as O);

describe("the L1 NLB speaks TLS only", () => {
  it("both listeners TLS with the certificate and policy; the API on 443", () => {
    const svc = l1ProxyManifests(spec).service as O;
    expect(svc.metadata.annotations).toMatchObject({ [`${LB}-ssl-cert`]: CERT, [`${LB}-ssl-ports`]: "https,az-health", [`${LB}-ssl-negotiation-policy`]: "ELBSecurityPolicy-TLS13-1-2-2021-06" });
    expect(svc.spec.ports.map((p: O) => [p.name, p.port])).toEqual([["https", 443], ["az-health", 8081]]);
    expect(svc.metadata.annotations["llm-ha.io/plain-http"]).toBeUndefined();
  });

  it("edge-sync reaches HAProxy through the level-user map socket, never the admin socket (whose `show env` holds the servers' key)", () => {
    const m = l1ProxyManifests(spec) as O;
    const pod = m.deployment.spec.template.spec as O;
    const sync = (pod.containers as O[]).find((c) => c.name === "edge-sync")!;
    const haproxy = (pod.containers as O[]).find((c) => c.name === "haproxy")!;
    expect(sync.args).toEqual(expect.arrayContaining(["--socket", "/var/run/llm-ha-map/map.sock"]));
    for (const c of [sync, ...(pod.initContainers as O[]).filter((x) => x.name === "edge-map")]) {
      expect((c.volumeMounts as O[]).map((v) => v.mountPath), c.name).not.toContain("/var/run/haproxy");
    }
    expect((haproxy.volumeMounts as O[]).map((v) => v.mountPath)).toEqual(expect.arrayContaining(["/var/run/haproxy", "/var/run/llm-ha-map"]));
    const cfg = Object.values((m.configMap as O).data as Record<string, string>).join("\n");
    expect(cfg).toMatch(/stats socket \/var\/run\/llm-ha-map\/map\.sock mode 600 level user/);
    expect(cfg).toMatch(/stats socket \/var\/run\/haproxy\/admin\.sock mode 600 level admin/);
  });

  it("without TLS (a dev waiver) the Service says so", () => {
    const svc = l1ProxyManifests({ ...spec, tls: null }).service as O;
    expect(svc.metadata.annotations["llm-ha.io/plain-http"]).toBe("waived");
    expect(svc.metadata.annotations[`${LB}-ssl-cert`]).toBeUndefined();
  });

  it("prod: TLS listeners from llm-ha:edge.certificateArn, Route53 checks over HTTPS", async () => {
    const rs = await captureStack("prod", { "llm-ha:edge": JSON.stringify({ certificateArn: CERT }) });
    const nlbs = of(rs, "kubernetes:core/v1:Service").filter((s) => s.spec?.type === "LoadBalancer");
    expect(nlbs.length).toBe(3);
    for (const s of nlbs) expect(s.metadata.annotations[`${LB}-ssl-cert`]).toBe(CERT);
    expect(of(rs, "aws:route53/healthCheck:HealthCheck").map((h) => h.type)).toEqual(["HTTPS", "HTTPS", "HTTPS"]);
  });

  it("only dev may waive TLS; a certificate ARN must be one; the docs' example account is refused", async () => {
    expect(paths(await stackFailure({ "llm-ha:edge": JSON.stringify({ plainHttp: true }) }, "prod"))).toEqual(["llm-ha:edge.plainHttp"]);
    expect(paths(await stackFailure({ "llm-ha:edge": JSON.stringify({ certificateArn: "my-cert" }) }, "prod"))).toEqual(["llm-ha:edge.certificateArn"]);
    const example = await stackFailure({ "llm-ha:edge": JSON.stringify({ certificateArn: CERT.replace("111122223333", "123456789012") }) }, "prod");
    expect(example.message).toMatch(/documentation's example account/);
    const rs = await captureStack("dev");
    expect(of(rs, "aws:route53/healthCheck:HealthCheck").map((h) => h.type)).toEqual(["HTTP", "HTTP"]);
  });
});

describe("images by digest, through the stack's pull-through cache", () => {
  it("maps upstreams to cache paths: Docker Hub (library for official images), ECR Public; nvcr.io stays direct", () => {
    expect(cachePath("docker.io/vllm/vllm-openai")).toEqual({ prefix: "docker-hub", path: "vllm/vllm-openai" });
    expect(cachePath("haproxy")).toEqual({ prefix: "docker-hub", path: "library/haproxy" });
    expect(cachePath("public.ecr.aws/docker/library/haproxy")).toEqual({ prefix: "ecr-public", path: "docker/library/haproxy" });
    expect(cachePath("nvcr.io/nvidia/k8s-device-plugin")).toBeNull();
    expect(splitDigestRef(`vllm/vllm-openai:v0.31.0@${IMAGES.vllm.digest}`)).toEqual({ repository: "vllm/vllm-openai", digest: IMAGES.vllm.digest });
    expect(splitDigestRef("vllm/vllm-openai:v0.31.0")).toBeNull();
    expect(() => pullRef("haproxy", "2.6", "root")).toThrow(/not a sha256 digest/);
    expect(chartImageValues(`r/eks/aws-load-balancer-controller@sha256:${"e5".repeat(32)}`, "v2.14.0")).toEqual({ repository: "r/eks/aws-load-balancer-controller", tag: `v2.14.0@sha256:${"e5".repeat(32)}` });
  });

  it("prod: the cache rules, every workload image by digest, vLLM ≥ 0.9 from the cache, the key as a Secret", async () => {
    const rs = await captureStack("prod");
    const rules = of(rs, "aws:ecr/pullThroughCacheRule:PullThroughCacheRule");
    expect(rules.map((r) => [r.ecrRepositoryPrefix, r.upstreamRegistryUrl])).toEqual([
      ["llm-ha-prod/ecr-public", "public.ecr.aws"],
      ["llm-ha-prod/docker-hub", "registry-1.docker.io"],
    ]);
    expect(rules[1].credentialArn).toMatch(/:secret:ecr-pullthroughcache\//);
    const workloads = [...of(rs, "kubernetes:apps/v1:Deployment"), ...of(rs, "kubernetes:apps/v1:DaemonSet")];
    const images = workloads.flatMap((w) => [...(w.spec.template.spec.initContainers ?? []), ...w.spec.template.spec.containers].map((c: O) => c.image as string));
    for (const i of images) expect(i).toMatch(/@sha256:[0-9a-f]{64}$/);
    const vllm = workloads.find((w) => w.metadata.name.startsWith("inference-"))!.spec.template.spec.containers[0];
    expect(vllm.image).toBe(`123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha-prod/docker-hub/vllm/vllm-openai@${IMAGES.vllm.digest}`);
    expect(vllm.env).toContainEqual({ name: "VLLM_API_KEY", valueFrom: { secretKeyRef: { name: "llm-ha-inference-key", key: "key" } } });
    expect(JSON.stringify(vllm.args)).not.toMatch(/api-key/);
    const agent = workloads.find((w) => w.metadata.name.startsWith("agent-"))!.spec.template.spec;
    expect(agent.containers[0].env).toContainEqual({ name: "LLMHA_INFERENCE_API_KEY_FILE", value: "/run/secrets/llm-ha-inference/key" });
    expect(agent.volumes).toContainEqual({ name: "inference-key", secret: { secretName: "llm-ha-inference-key", defaultMode: 0o444 } });
  });

  it("refuses an inference image by tag, naming the key", async () => {
    const e = await stackFailure({ "llm-ha:inference": JSON.stringify({ model: "Qwen/Qwen2.5-7B-Instruct", gpusPerPod: 1, image: "vllm/vllm-openai:v0.8.5" }) });
    expect(paths(e)).toEqual(["llm-ha:inference.image"]);
    expect(e.message).toMatch(/by digest/);
  });
});
