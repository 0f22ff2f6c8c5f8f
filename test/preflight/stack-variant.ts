/**
 * A preflight test's stack file: dev's with every user setting a real user gives filled in, as
 * a project folder of its own (a stack named qa, so TLS is required). Shared by the preflight tests.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { WORKLOAD_ROLE_NAMES } from "../../contracts/redis-roles";
import { testTempDir } from "../support/temp-dir";

export const ROOT = path.resolve(__dirname, "..", "..");

/** The variant's ACM certificate and Docker Hub pull-through secret (us-east-1, the stack's region). */
export const CERT_ARN = "arn:aws:acm:us-east-1:111122223333:certificate/6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0";
export const SECRET_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:ecr-pullthroughcache/docker-hub-Ab12Cd";
export const SERVICE_NAME = "infer.qa.llm-ha.net";

/** What `aws acm describe-certificate` says of a certificate that serves the variant: issued, for its service name. */
export const ISSUED_CERT = { Certificate: { CertificateArn: CERT_ARN, DomainName: SERVICE_NAME, SubjectAlternativeNames: [SERVICE_NAME], Status: "ISSUED" } };
/** What `aws secretsmanager describe-secret` says of the variant's secret (no value: describe never returns one). */
export const PULL_THROUGH_SECRET = { ARN: SECRET_ARN, Name: "ecr-pullthroughcache/docker-hub" };

/** EC2's answer for the variant's system nodes (m6i.large: 2 vCPUs), for DescribeInstanceTypes. */
export const SYSTEM_TYPES = { InstanceTypes: [{ InstanceType: "m6i.large" as const, VCpuInfo: { DefaultVCpus: 2 } }] };

/** The user settings a real user sets for a dev-like stack: what the stack files leave out. */
export const FILLED = [
  "  llm-ha:redisRolePasswords:",
  ...WORKLOAD_ROLE_NAMES.flatMap((r, i) => [`    ${r}:`, `      secure: v1:AAAABBBBCCCCDDDD${i}`]),
  "  llm-ha:apiEndpoint:",
  "    access: public",
  "    publicAccessCidrs:",
  "      - 203.0.113.7/32",
  "  llm-ha:agentImage: 111122223333.dkr.ecr.us-east-1.amazonaws.com/llm-ha-qa/agent@sha256:" + "c3".repeat(32),
  "  llm-ha:inferenceApiKey:",
  "    secure: v1:EEEEFFFFGGGGHHHH",
  "  llm-ha:images:",
  `    dockerHubSecretArn: ${SECRET_ARN}`,
  "    haproxyDigest: sha256:" + "d4".repeat(32),
  "    lbControllerDigest: sha256:" + "e5".repeat(32),
  "    awsCliDigest: sha256:" + "f6".repeat(32),
  "    dcgmExporterDigest: sha256:" + "a7".repeat(32),
].join("\n");

/** dev's stack file with the user settings filled in and `edit` applied, as its own project folder (removed when the calling test finishes). */
export function variant(edit: (yaml: string) => string = (y) => y): string {
  const dir = testTempDir("llmha-preflight-");
  fs.copyFileSync(path.join(ROOT, "Pulumi.yaml"), path.join(dir, "Pulumi.yaml"));
  const file = path.join(dir, "Pulumi.qa.yaml");
  const yaml = fs
    .readFileSync(path.join(ROOT, "Pulumi.dev.yaml"), "utf8")
    .replace("  llm-ha:dns:\n", `  llm-ha:dns:\n    zoneId: Z04217753KQ3ZPLMVTB2\n    serviceName: ${SERVICE_NAME}\n`)
    .replace("config:\n", `config:\n${FILLED}\n`)
    // dev's own stack may waive TLS; a stack of another name needs the certificate.
    .replace("  llm-ha:edge:\n    plainHttp: true\n", `  llm-ha:edge:\n    certificateArn: ${CERT_ARN}\n`);
  fs.writeFileSync(file, edit(yaml));
  return file;
}
