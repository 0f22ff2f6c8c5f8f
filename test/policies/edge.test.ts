import { describe, expect, it } from "vitest";
import { imagesByDigest, l1AuthRequired, l1TlsRequired, L1_AUTH_ENFORCEMENT } from "../../policies/edge";
import { at, changed, happyStack, messages } from "./fixtures";

const LB = "service.beta.kubernetes.io/aws-load-balancer";

describe("l1-tls-required", () => {
  it("passes an internet-facing NLB with an ACM certificate on every port", async () => {
    expect(await messages(l1TlsRequired, happyStack())).toEqual([]);
  });

  it("fails the NLB without a certificate", async () => {
    const rs = changed("l1-us-east-1a-nlb", (p) => delete at(p, "metadata.annotations")[`${LB}-ssl-cert`]);
    expect(await messages(l1TlsRequired, rs)).toEqual([`l1-us-east-1a-nlb faces the internet without a TLS certificate (${LB}-ssl-cert with an ACM ARN).`]);
  });

  it("fails a port left out of ssl-ports (the /az/health listener in clear text)", async () => {
    const rs = changed("l1-us-east-1a-nlb", (p) => (at(p, "metadata.annotations")[`${LB}-ssl-ports`] = "https"));
    expect(await messages(l1TlsRequired, rs)).toEqual([`l1-us-east-1a-nlb serves az-health (8081) in clear text: list every port in ${LB}-ssl-ports.`]);
  });

  it("lets a dev stack's explicit waiver through, and ignores internal load balancers", async () => {
    const waived = changed("l1-us-east-1a-nlb", (p) => (p.metadata = { name: "l1", annotations: { [`${LB}-scheme`]: "internet-facing", "llm-ha.io/plain-http": "waived" } }));
    expect(await messages(l1TlsRequired, waived)).toEqual([]);
    const internal = changed("l1-us-east-1a-nlb", (p) => (p.metadata = { name: "l1", annotations: { [`${LB}-scheme`]: "internal" } }));
    expect(await messages(l1TlsRequired, internal)).toEqual([]);
  });
});

describe("l1-auth-required", () => {
  it("passes an L1 haproxy.cfg whose frontend answers 401 itself", async () => {
    expect(await messages(l1AuthRequired, happyStack())).toEqual([]);
  });

  it("fails an L1 haproxy.cfg that forwards without a key", async () => {
    const rs = changed("l1-us-east-1a-cfg", (p) => (at(p, "data")["haproxy.cfg"] = "frontend inference\n  bind :8080\n  default_backend inference_servers\n"));
    expect(await messages(l1AuthRequired, rs)).toEqual([
      "l1-us-east-1a-cfg: haproxy.cfg lets clients through without a key (no `http-request return status 401` on the public frontend).",
    ]);
  });

  it("ignores other ConfigMaps; is mandatory", async () => {
    const rs = changed("l1-us-east-1a-cfg", (p) => (at(p, "metadata").labels = { "app.kubernetes.io/name": "other" }));
    at(rs.find((r) => r.name === "l1-us-east-1a-cfg")!.props, "data")["haproxy.cfg"] = "frontend x\n";
    expect(await messages(l1AuthRequired, rs)).toEqual([]);
    expect(L1_AUTH_ENFORCEMENT).toBe("mandatory");
  });
});

describe("images-by-digest", () => {
  it("passes workloads whose every image names a digest", async () => {
    expect(await messages(imagesByDigest, happyStack())).toEqual([]);
  });

  it("fails a container pinned by tag only", async () => {
    const rs = changed("inference-us-east-1a", (p) => ((at(p, "spec.template.spec").containers as Record<string, unknown>[])[0].image = "vllm/vllm-openai:v0.8.5"));
    expect(await messages(imagesByDigest, rs)).toEqual(["inference-us-east-1a: container vllm runs vllm/vllm-openai:v0.8.5 by tag, not by digest (<repo>@sha256:<64 hex>)."]);
  });

  it("checks init containers too", async () => {
    const rs = changed("agent", (p) => (at(p, "spec.template.spec").initContainers = [{ name: "weights", image: "public.ecr.aws/aws-cli/aws-cli:2.27.50" }]));
    expect(await messages(imagesByDigest, rs)).toEqual(["agent: container weights runs public.ecr.aws/aws-cli/aws-cli:2.27.50 by tag, not by digest (<repo>@sha256:<64 hex>)."]);
  });
});
