/**
 * What the edge takes from the account as it is: the ACM certificate of the NLBs' TLS listeners
 * (`llm-ha:edge.certificateArn`) and the Secrets Manager secret of the Docker Hub pull-through
 * cache rule (`llm-ha:images.dockerHubSecretArn`). The program checks only their ARNs' shape;
 * `pulumi up` fails late on a certificate that is not issued, sits in another region or does
 * not name the service, and on a secret ECR cannot use. Through the `aws` CLI (no ACM or
 * Secrets Manager SDK client here); a secret's value is never read or printed.
 */
import type { StackConfig } from "../config";
import type { AwsCli, AwsCliError } from "./aws-cli";
import type { CheckRow } from "./checks";

export const CERTIFICATE_CHECK = "certificate";
export const PULL_THROUGH_SECRET_CHECK = "pull-through secret";
/** ECR refuses a pull-through cache rule whose secret's name lacks this prefix. */
export const PULL_THROUGH_PREFIX = "ecr-pullthroughcache/";

type Obj = Record<string, unknown>;

/** The region field of an ARN (`arn:aws:acm:<region>:…`), empty when there is none. */
export const arnRegion = (arn: string): string => arn.split(":")[3] ?? "";

/**
 * True when a certificate name covers `host`: the same name, or a wildcard `*.<rest>` and `host`
 * one label more than `<rest>` (a wildcard covers exactly one label: `*.example.org` covers
 * `infer.example.org`, not `example.org` nor `a.infer.example.org`). Case and a final dot do not count.
 */
export function nameCovers(name: string, host: string): boolean {
  const norm = (s: string) => s.toLowerCase().replace(/\.$/, "");
  const n = norm(name);
  const h = norm(host);
  if (!n.startsWith("*.")) return n === h;
  const dot = h.indexOf(".");
  return dot > 0 && h.slice(dot + 1) === n.slice(2);
}

/** `aws <args>`, or null when AWS answers `ResourceNotFoundException`. */
async function orNotFound(cli: AwsCli, args: string[]): Promise<Obj | null> {
  try {
    return (await cli(args)) as Obj;
  } catch (err) {
    if ((err as AwsCliError).code === "ResourceNotFoundException") return null;
    throw err;
  }
}

/** The certificate: in the stack's region, found, ISSUED, and naming `dns.serviceName`. Each failure is its own row. */
export async function certificateRows(c: Pick<StackConfig, "edge" | "dns" | "region">, cli: AwsCli): Promise<CheckRow[]> {
  const arn = c.edge.certificateArn;
  if (!arn) return [{ check: CERTIFICATE_CHECK, status: "ok", detail: "none: llm-ha:edge.plainHttp serves the edge in clear text", fix: "" }];
  const svc = c.dns.serviceName;
  const request = `aws acm request-certificate --domain-name ${svc} --validation-method DNS --region ${c.region}  # add its validation CNAME to the hosted zone, then set llm-ha:edge.certificateArn to its ARN`;
  const region = arnRegion(arn);
  if (region !== c.region) {
    // An NLB listener takes a certificate of its own region only.
    return [{ check: `${CERTIFICATE_CHECK} region`, status: "invalid", detail: `in ${region}, the stack in ${c.region}: an NLB takes a certificate of its own region only (${arn})`, fix: `set llm-ha:edge.certificateArn to a certificate in ${c.region}: ${request}` }];
  }
  const r = await orNotFound(cli, ["acm", "describe-certificate", "--certificate-arn", arn]);
  if (r === null) return [{ check: CERTIFICATE_CHECK, status: "missing", detail: `not in this account's ${c.region}: ${arn}`, fix: request }];
  const cert = (r.Certificate ?? {}) as Obj;
  const rows: CheckRow[] = [];
  const status = String(cert.Status ?? "unknown");
  if (status !== "ISSUED") {
    rows.push({
      check: `${CERTIFICATE_CHECK} status`,
      status: "invalid",
      detail: `${status}, not ISSUED: the NLB's TLS listener refuses it (${arn})`,
      fix:
        status === "PENDING_VALIDATION"
          ? `create its validation CNAME in the hosted zone (aws acm describe-certificate --certificate-arn ${arn} --region ${c.region} --query 'Certificate.DomainValidationOptions[].ResourceRecord') and wait for ISSUED`
          : request,
    });
  }
  const names = [...new Set([String(cert.DomainName ?? ""), ...(Array.isArray(cert.SubjectAlternativeNames) ? cert.SubjectAlternativeNames.map(String) : [])].filter(Boolean))];
  if (!names.some((n) => nameCovers(n, svc))) {
    rows.push({
      check: `${CERTIFICATE_CHECK} names`,
      status: "invalid",
      detail: `none of ${names.join(", ") || "(no names)"} covers ${svc} (llm-ha:dns.serviceName; a wildcard covers one label): ${arn}`,
      fix: request,
    });
  }
  return rows.length ? rows : [{ check: CERTIFICATE_CHECK, status: "ok", detail: `ISSUED in ${c.region}, ${names.filter((n) => nameCovers(n, svc)).join(", ")} covers ${svc}`, fix: "" }];
}

/** The secret's name inside its ARN (`…:secret:<name>-<6 characters AWS adds>`). */
export function secretNameOf(arn: string): string {
  const name = arn.split(":secret:")[1] ?? "";
  return name.replace(/-[A-Za-z0-9]{6}$/, "");
}

/** The Docker Hub pull-through secret: in the stack's region, found, not being deleted, named `ecr-pullthroughcache/…`. */
export async function pullThroughSecretRows(c: Pick<StackConfig, "images" | "region">, cli: AwsCli): Promise<CheckRow[]> {
  const arn = c.images.dockerHubSecretArn;
  if (!arn) return [];
  const given = secretNameOf(arn);
  const name = given.startsWith(PULL_THROUGH_PREFIX) ? given : `${PULL_THROUGH_PREFIX}docker-hub`;
  // The value goes in from a file, never on the command line (it would sit in the shell's history and in ps).
  const create = `aws secretsmanager create-secret --name ${name} --secret-string file://docker-hub.json --region ${c.region}  # docker-hub.json holds {"username":"<Docker Hub user>","accessToken":"<access token>"}; then set llm-ha:images.dockerHubSecretArn to its ARN`;
  const region = arnRegion(arn);
  if (region !== c.region) {
    return [{ check: `${PULL_THROUGH_SECRET_CHECK} region`, status: "invalid", detail: `in ${region}, the stack in ${c.region}: ECR's pull-through cache rule takes a secret of its own region only (${arn})`, fix: create }];
  }
  const r = await orNotFound(cli, ["secretsmanager", "describe-secret", "--secret-id", arn]);
  if (r === null) return [{ check: PULL_THROUGH_SECRET_CHECK, status: "missing", detail: `not in this account's ${c.region}: ${arn}`, fix: create }];
  const rows: CheckRow[] = [];
  const actual = String(r.Name ?? given);
  if (!actual.startsWith(PULL_THROUGH_PREFIX)) {
    rows.push({ check: `${PULL_THROUGH_SECRET_CHECK} name`, status: "invalid", detail: `named ${actual}: ECR refuses a pull-through cache secret whose name does not start with ${PULL_THROUGH_PREFIX}`, fix: create });
  }
  if (r.DeletedDate !== undefined && r.DeletedDate !== null) {
    rows.push({ check: PULL_THROUGH_SECRET_CHECK, status: "invalid", detail: `${actual} is scheduled for deletion: ECR cannot pull through it once it is gone`, fix: `aws secretsmanager restore-secret --secret-id ${arn} --region ${c.region}` });
  }
  return rows.length ? rows : [{ check: PULL_THROUGH_SECRET_CHECK, status: "ok", detail: `${actual} exists in ${c.region} (its value is not read)`, fix: "" }];
}
