import { digestCommand, IMAGES, SHA256_DIGEST, splitDigestRef, type ImageName } from "../images";
import * as pulumi from "@pulumi/pulumi";
import { didYouMean } from "../../contracts/did-you-mean";
import { archiveName } from "../chart-archive";
import { LB_CONTROLLER_CHART } from "../lb-controller";
import type { Settings } from "./read";
import type { StackConfig } from "./stack-config";

/** AWS's recommended policy for NLB TLS listeners: TLS 1.3 and 1.2 only. */
export const DEFAULT_SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06";
/** Stacks that may run the edge in clear text (`llm-ha:edge.plainHttp: true`): a developer's own. */
export const PLAIN_HTTP_STACKS = Object.freeze(["dev"]);

const ACM_ARN = /^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[0-9a-f-]{36}$/;
const PULL_THROUGH_SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:ecr-pullthroughcache\/[A-Za-z0-9/_+=.@-]+$/;
/** The account id of AWS's documentation examples: a stack file carrying it was never filled in. */
const EXAMPLE_ACCOUNT = ":123456789012:";

/**
 * `llm-ha:edge`: the NLBs' TLS listeners. `certificateArn` (ACM, covering `dns.serviceName`)
 * is required; only a `dev` stack may waive TLS, explicitly, with `plainHttp: true`.
 */
export function edgeOf(s: Settings, stack: string): StackConfig["edge"] {
  const { p, key } = s;
  const edge = s.obj("edge");
  const plainHttp = edge.plainHttp === true;
  const sslPolicy = s.str(edge, "sslPolicy", key("edge.sslPolicy"), DEFAULT_SSL_POLICY);
  if (sslPolicy && !/^ELBSecurityPolicy-[A-Za-z0-9-]+$/.test(sslPolicy)) p.add(key("edge.sslPolicy"), `${sslPolicy} is not an ELB security policy name (ELBSecurityPolicy-…)`);
  if (plainHttp) {
    if (!PLAIN_HTTP_STACKS.includes(stack)) p.add(key("edge.plainHttp"), `only a ${PLAIN_HTTP_STACKS.join("/")} stack may serve the public edge in clear text; ${stack} needs ${key("edge.certificateArn")}`);
    if (edge.certificateArn !== undefined) p.add(key("edge.plainHttp"), `give either ${key("edge.certificateArn")} or plainHttp: true, not both`);
    return { certificateArn: null, plainHttp, sslPolicy };
  }
  const certificateArn = s.str(edge, "certificateArn", key("edge.certificateArn"));
  if (certificateArn && !ACM_ARN.test(certificateArn)) p.add(key("edge.certificateArn"), `${certificateArn} is not an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)`);
  else if (certificateArn.includes(EXAMPLE_ACCOUNT)) p.add(key("edge.certificateArn"), `${certificateArn} is the documentation's example account: request a certificate for ${key("dns.serviceName")} in ACM and set its ARN`);
  return { certificateArn, plainHttp, sslPolicy };
}

/**
 * `llm-ha:images`: the digests no default pins (see infra/images.ts), each `sha256:<64 hex>`,
 * and the Secrets Manager secret (name prefix `ecr-pullthroughcache/`) of the Docker Hub
 * pull-through cache rule.
 */
export function imagesOf(s: Settings): StackConfig["images"] {
  const { p, key } = s;
  const images = s.obj("images");
  const digests = {} as Record<ImageName, string>;
  for (const [name, image] of Object.entries(IMAGES) as [ImageName, (typeof IMAGES)[ImageName]][]) {
    const given = images[image.setting];
    const path = key(`images.${image.setting}`);
    if (given === undefined) {
      // A digest nobody pinned yet: only a stack that runs the image needs it (the caller checks).
      digests[name] = image.digest ?? "";
    } else if (typeof given !== "string" || !SHA256_DIGEST.test(given)) {
      p.add(path, `must be sha256:<64 hex> of ${image.repository}:${image.tag}: ${digestCommand(image)}`);
      digests[name] = "";
    } else digests[name] = given;
  }
  const dockerHubSecretArn = s.str(images, "dockerHubSecretArn", key("images.dockerHubSecretArn"));
  if (dockerHubSecretArn && !PULL_THROUGH_SECRET_ARN.test(dockerHubSecretArn)) {
    p.add(key("images.dockerHubSecretArn"), `${dockerHubSecretArn} must be a Secrets Manager secret ARN whose name starts with ecr-pullthroughcache/ (ECR refuses others)`);
  } else if (dockerHubSecretArn.includes(EXAMPLE_ACCOUNT)) p.add(key("images.dockerHubSecretArn"), `${dockerHubSecretArn} is the documentation's example account: create the secret and set its ARN`);
  return { digests, dockerHubSecretArn };
}

/**
 * `llm-ha:charts`: copies of the pinned chart archives already on the runner, for runners
 * without internet (`lbControllerArchive`: a path to aws-load-balancer-controller-<version>.tgz).
 * Checked against the pinned digest like a download (infra/chart-archive.ts).
 */
export function chartsOf(s: Settings): StackConfig["charts"] {
  const charts = s.obj("charts");
  const known = [LB_CONTROLLER_CHART.setting];
  const out: StackConfig["charts"] = {};
  for (const [k, v] of Object.entries(charts)) {
    const path = s.key(`charts.${k}`);
    if (k !== LB_CONTROLLER_CHART.setting) s.p.add(path, `is not a chart setting${didYouMean(k, known)}; known: ${known.join(", ")}`);
    else if (typeof v !== "string" || v.trim() === "") s.p.add(path, `must be the path of ${archiveName(LB_CONTROLLER_CHART)} on this runner`);
    else out.lbControllerArchive = v;
  }
  return out;
}

/** A missing digest the stack needs (`needed`), reported with the command that reads it. */
export function requireDigest(s: Settings, images: StackConfig["images"], name: ImageName, needed: boolean): void {
  if (!needed || images.digests[name]) return;
  const image = IMAGES[name];
  s.p.add(s.key(`images.${image.setting}`), `is required: the digest of ${image.repository}:${image.tag} (${digestCommand(image)})`);
}

/** An image setting given by the user: it must name a digest, whatever its tag says. */
export function digestRefProblem(ref: string): string | null {
  return splitDigestRef(ref) ? null : `${ref} must name the image by digest (<repo>[:tag]@sha256:<64 hex>): a tag can move under running nodes`;
}

/** `llm-ha:inferenceApiKey` (secret): vLLM's `--api-key`, which the agents send; never in a stack file in clear. */
export function inferenceKeyOf(s: Settings): pulumi.Output<string> {
  const k = s.cfg.getSecret("inferenceApiKey");
  if (k === undefined) s.p.add(s.key("inferenceApiKey"), 'is required: pulumi config set --secret llm-ha:inferenceApiKey "$(openssl rand -hex 32)"');
  return k ?? pulumi.secret("");
}
