import { describe, expect, it } from "vitest";
import { chartsByDigest, imagesByDigest, l1AuthRequired, l1TlsRequired, L1_AUTH_ENFORCEMENT } from "../../policies/edge";
import type { CapturedResource } from "../../policies/runner";
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

describe("charts-by-digest", () => {
  const HEX = "45051f634b33e10baccb3354d0681b7de787c60445e599fa276e0c9aedd4ccd5";
  const release = (props: Record<string, unknown>): CapturedResource => ({
    type: "kubernetes:helm.sh/v3:Release",
    name: "lbc-release",
    urn: "urn:pulumi:test::llm-ha::kubernetes:helm.sh/v3:Release::lbc-release",
    props: { name: "aws-load-balancer-controller", version: "3.5.0", namespace: "kube-system", ...props },
  });
  const ARCHIVE = `/home/ci/.cache/llm-ha/helm-charts/sha256-${HEX}/aws-load-balancer-controller-3.5.0.tgz`;

  it("passes the archive checked against its digest, and an OCI reference by digest", async () => {
    expect(await messages(chartsByDigest, [...happyStack(), release({ chart: ARCHIVE })])).toEqual([]);
    expect(await messages(chartsByDigest, [release({ chart: `oci://public.ecr.aws/eks-charts/aws-load-balancer-controller@sha256:${HEX}` })])).toEqual([]);
  });

  // What the stack did before the chart was pinned by digest: name and version from the repository, nothing pinning the archive.
  it("fails a chart referenced by version only", async () => {
    expect(await messages(chartsByDigest, [release({ chart: "aws-load-balancer-controller", repositoryOpts: { repo: "https://aws.github.io/eks-charts" } })])).toEqual([
      "lbc-release: chart aws-load-balancer-controller 3.5.0 from https://aws.github.io/eks-charts is referenced by version only, not by digest: install the archive checked against a pinned sha256 (infra/chart-archive.ts) or oci://…@sha256:<64 hex>.",
    ]);
    expect(await messages(chartsByDigest, [release({ chart: "oci://public.ecr.aws/eks-charts/aws-load-balancer-controller", version: "3.5.0" })])).toHaveLength(1);
    // An archive outside a digest folder is any file of that name.
    expect(await messages(chartsByDigest, [release({ chart: "/tmp/aws-load-balancer-controller-3.5.0.tgz" })])).toHaveLength(1);
  });

  it("fails a checked archive that still names a repository (Helm would download from it)", async () => {
    expect(await messages(chartsByDigest, [release({ chart: ARCHIVE, repositoryOpts: { repo: "https://aws.github.io/eks-charts" } })])).toEqual([
      `lbc-release: chart ${ARCHIVE} 3.5.0 from https://aws.github.io/eks-charts names a repository: Helm would download the chart from it instead of installing the checked archive; drop repositoryOpts.`,
    ]);
  });
});
