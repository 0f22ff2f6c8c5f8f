// The public edge: what faces the internet is the L1 NLB and HAProxy behind it. It
// speaks only TLS, HAProxy authenticates every client before anything reaches a server or
// the fallback, and every container and Helm chart the stack runs is the one that was
// reviewed (by digest).
import type { EnforcementLevel, ResourceValidationPolicy } from "@pulumi/policy";
import { chartReference } from "../contracts/charts";
import { PLAIN_HTTP_WAIVER } from "../contracts/names";
import { list, record, str, stringMap, type Props } from "./props";

const SERVICE_TYPE = "kubernetes:core/v1:Service";
const CONFIG_MAP_TYPE = "kubernetes:core/v1:ConfigMap";
const LB = "service.beta.kubernetes.io/aws-load-balancer";
/** The L1 proxy's pods and ConfigMap carry `app.kubernetes.io/name: l1-proxy`. */
const L1_APP = "l1-proxy";

/** HAProxy answers a request without a valid key itself: the line every authenticated frontend renders. */
export const AUTH_401_LINE = /^\s*http-request return status 401 /m;
/** `l1-auth-required` refuses a stack whose public frontend lets a request without a client key through. */
export const L1_AUTH_ENFORCEMENT: EnforcementLevel = "mandatory";

export const WORKLOAD_TYPES = [
  "kubernetes:apps/v1:Deployment",
  "kubernetes:apps/v1:DaemonSet",
  "kubernetes:apps/v1:StatefulSet",
  "kubernetes:apps/v1:ReplicaSet",
  "kubernetes:batch/v1:Job",
  "kubernetes:batch/v1:CronJob",
  "kubernetes:core/v1:Pod",
];
const DIGEST_REF = /@sha256:[0-9a-f]{64}$/;

function isInternetNlb(props: Props): boolean {
  const spec = record(props.spec);
  const annotations = stringMap(record(props.metadata)?.annotations);
  return str(spec?.type) === "LoadBalancer" && annotations[`${LB}-scheme`] === "internet-facing";
}

export const l1TlsRequired: ResourceValidationPolicy = {
  name: "l1-tls-required",
  description:
    "L1 edge: every internet-facing NLB Service terminates TLS on every port with an ACM certificate (aws-load-balancer-ssl-cert, -ssl-ports, -ssl-negotiation-policy): client keys and prompts never cross the internet in clear text. Only a dev stack's explicit waiver (llm-ha.io/plain-http) is let through.",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    if (args.type !== SERVICE_TYPE) args.notApplicable(`Policy only applies to ${SERVICE_TYPE}`);
    const props = args.props as Props;
    if (!isInternetNlb(props)) return;
    const annotations = stringMap(record(props.metadata)?.annotations);
    if (annotations[PLAIN_HTTP_WAIVER] === "waived") return;
    const cert = annotations[`${LB}-ssl-cert`] ?? "";
    if (!/^arn:aws[a-z-]*:acm:/.test(cert)) {
      reportViolation(`${args.name} faces the internet without a TLS certificate (${LB}-ssl-cert with an ACM ARN).`);
      return;
    }
    const tlsPorts = (annotations[`${LB}-ssl-ports`] ?? "").split(",").map((x) => x.trim()).filter((x) => x !== "");
    const plain = list(record(props.spec)?.ports)
      .map(record)
      .filter((p): p is Props => p !== undefined)
      .filter((p) => !tlsPorts.includes("*") && !tlsPorts.includes(str(p.name) ?? "\0") && !tlsPorts.includes(String(p.port)))
      .map((p) => `${str(p.name) ?? "unnamed"} (${String(p.port)})`);
    if (plain.length) reportViolation(`${args.name} serves ${plain.join(", ")} in clear text: list every port in ${LB}-ssl-ports.`);
  },
};

export const l1AuthRequired: ResourceValidationPolicy = {
  name: "l1-auth-required",
  description:
    "The L1 HAProxy configuration (ConfigMap haproxy.cfg of the l1-proxy) authenticates clients on its public frontend: a request without a valid key gets 401 from the proxy (`http-request return status 401`), before any server or the fallback sees it.",
  enforcementLevel: L1_AUTH_ENFORCEMENT,
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    if (args.type !== CONFIG_MAP_TYPE) args.notApplicable(`Policy only applies to ${CONFIG_MAP_TYPE}`);
    const props = args.props as Props;
    if (stringMap(record(props.metadata)?.labels)["app.kubernetes.io/name"] !== L1_APP) return;
    const cfg = str(record(props.data)?.["haproxy.cfg"]);
    if (cfg === undefined) {
      reportViolation(`${args.name} is an L1 proxy ConfigMap without haproxy.cfg.`);
      return;
    }
    if (!AUTH_401_LINE.test(cfg)) reportViolation(`${args.name}: haproxy.cfg lets clients through without a key (no \`http-request return status 401\` on the public frontend).`);
  },
};

export function podSpecOf(type: string, props: Props): Props | undefined {
  const spec = record(props.spec);
  if (type === "kubernetes:core/v1:Pod") return spec;
  if (type === "kubernetes:batch/v1:CronJob") return record(record(record(record(spec?.jobTemplate)?.spec)?.template)?.spec);
  return record(record(spec?.template)?.spec);
}

export const imagesByDigest: ResourceValidationPolicy = {
  name: "images-by-digest",
  description:
    "L1–L4: every container and init container of a workload names its image by digest (`@sha256:`): a tag can move under running nodes, so a node woken at 3 a.m. could run code nobody reviewed (infra/images.ts).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    if (!WORKLOAD_TYPES.includes(args.type)) args.notApplicable(`Policy only applies to ${WORKLOAD_TYPES.join(", ")}`);
    const spec = podSpecOf(args.type, args.props as Props);
    for (const c of [...list(spec?.initContainers), ...list(spec?.containers)].map(record)) {
      const image = str(c?.image) ?? "";
      if (!DIGEST_REF.test(image)) reportViolation(`${args.name}: container ${str(c?.name) ?? "?"} runs ${image || "no image"} by tag, not by digest (<repo>@sha256:<64 hex>).`);
    }
  },
};

/** Helm releases and charts the Kubernetes provider installs from a chart reference. */
export const HELM_CHART_TYPES = ["kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"];

export const chartsByDigest: ResourceValidationPolicy = {
  name: "charts-by-digest",
  description:
    "L1–L4: every Helm release installs its chart by digest: a packaged archive whose sha256 the program checked (a path under a `sha256-<64 hex>/` folder, no repository named) or an OCI reference `@sha256:`. A chart named by version only is whatever archive its repository serves that day (infra/chart-archive.ts).",
  enforcementLevel: "mandatory",
  configSchema: { properties: {} },
  validateResource: (args, reportViolation) => {
    if (!HELM_CHART_TYPES.includes(args.type)) args.notApplicable(`Policy only applies to ${HELM_CHART_TYPES.join(", ")}`);
    const props = args.props as Props;
    const chart = str(props.chart) ?? "";
    const version = str(props.version);
    const repo = str(record(props.repositoryOpts)?.repo);
    const ref = chartReference(chart);
    const what = `${chart || "no chart"}${version ? ` ${version}` : ""}${repo ? ` from ${repo}` : ""}`;
    if (ref.digest === null) {
      reportViolation(`${args.name}: chart ${what} is referenced by version only, not by digest: install the archive checked against a pinned sha256 (infra/chart-archive.ts) or oci://…@sha256:<64 hex>.`);
    } else if (ref.kind === "archive" && repo) {
      reportViolation(`${args.name}: chart ${what} names a repository: Helm would download the chart from it instead of installing the checked archive; drop repositoryOpts.`);
    }
  },
};
