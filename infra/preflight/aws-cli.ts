/**
 * The online checks that need EKS, ECR, S3, ACM and Secrets Manager: made through the `aws`
 * CLI (v2, already a prerequisite: the kubeconfig runs `aws eks get-token`), read-only, JSON
 * out. The SDK clients for those services are not dependencies of this repository; the runner
 * is passed in, so tests drive these checks with a fake that answers as the CLI does.
 */
import { execFile } from "node:child_process";
import { ADDON_NAMES } from "../addons";
import type { StackConfig } from "../config";
import type { CheckRow } from "./checks";
import { adoptedDataChecks } from "./data-tier";
import { CERTIFICATE_CHECK, certificateRows, PULL_THROUGH_SECRET_CHECK, pullThroughSecretRows } from "./edge-checks";
import { PROMETHEUS_CHECK, prometheusRows } from "./prometheus-check";
import { WEIGHTS_CHECK, weightsRows } from "./weights-check";

/** Runs `aws <args> --output json` and returns the parsed answer; rejects with `AwsCliError`. */
export type AwsCli = (args: string[]) => Promise<unknown>;

/** A failed `aws` call: `code` is the AWS error code the CLI printed (`ImageNotFoundException`), if any. */
export class AwsCliError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = "AwsCliError";
  }
}

export function awsCli(region: string, timeoutMs = 30_000): AwsCli {
  return (args) =>
    new Promise((resolve, reject) => {
      execFile("aws", [...args, "--region", region, "--output", "json"], { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
        if (err) {
          const line = (stderr || err.message).trim().split("\n").pop() ?? "";
          return reject(new AwsCliError(`aws ${args.slice(0, 2).join(" ")}: ${line}`, /\(([A-Za-z]+)\)/.exec(line)?.[1]));
        }
        try {
          resolve(stdout.trim() ? JSON.parse(stdout) : {});
        } catch {
          reject(new AwsCliError(`aws ${args.slice(0, 2).join(" ")}: not JSON`));
        }
      });
    });
}

type Obj = Record<string, unknown>;
const arr = (v: unknown): Obj[] => (Array.isArray(v) ? (v as Obj[]) : []);

/** EKS's versions of one add-on for a Kubernetes version, and which is its default. */
async function addonVersions(cli: AwsCli, addon: string, k8s: string): Promise<{ versions: string[]; dflt?: string }> {
  const r = (await cli(["eks", "describe-addon-versions", "--kubernetes-version", k8s, "--addon-name", addon])) as Obj;
  const versions = arr(arr(r.addons)[0]?.addonVersions);
  const isDefault = (v: Obj) => arr(v.compatibilities).some((c) => c.clusterVersion === k8s && c.defaultVersion === true);
  return { versions: versions.map((v) => String(v.addonVersion)), dflt: versions.find(isDefault)?.addonVersion as string | undefined };
}

/** `<account>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:<hex>` split up, or undefined for another registry. */
export function ecrImage(ref: string): { account: string; region: string; repository: string; digest: string } | undefined {
  const m = /^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com\/([a-z0-9._/-]+)@(sha256:[0-9a-f]{64})$/.exec(ref);
  return m ? { account: m[1], region: m[2], repository: m[3], digest: m[4] } : undefined;
}

/** The add-on versions, the agent image, the weights prefix, the certificate, the pull-through secret, who reads the alert rules and an adopted Redis or MSK, one guarded check each. */
export async function cliChecks(c: StackConfig, cli: AwsCli, guard: (check: string, f: () => Promise<CheckRow[]>) => Promise<void>): Promise<void> {
  // An existing cluster's add-ons are the operator's: the existing-cluster rows check the ones llm-ha needs.
  if (c.existingCluster === undefined) await guard("add-on versions", async () => {
    const rows: CheckRow[] = [];
    for (const addon of ADDON_NAMES) {
      const { versions, dflt } = await addonVersions(cli, addon, c.kubernetesVersion);
      const pinned = c.addonVersions[addon];
      const check = `add-on ${addon}`;
      if (pinned !== undefined && !versions.includes(pinned)) {
        rows.push({ check, status: "invalid", detail: `${pinned} is not offered for Kubernetes ${c.kubernetesVersion}`, fix: `remove llm-ha:addonVersions.${addon} (the stack resolves ${dflt ?? "the default"}) or pin one of ${versions.slice(0, 3).join(", ")}` });
      } else if (pinned === undefined && dflt === undefined) {
        rows.push({ check, status: "missing", detail: `EKS marks no default version of ${addon} for Kubernetes ${c.kubernetesVersion}`, fix: `pin one with llm-ha:addonVersions.${addon} (aws eks describe-addon-versions --kubernetes-version ${c.kubernetesVersion} --addon-name ${addon})` });
      } else rows.push({ check, status: "ok", detail: pinned ? `${pinned} (pinned) offered for ${c.kubernetesVersion}` : `resolves to ${dflt} for ${c.kubernetesVersion}`, fix: "" });
    }
    return rows;
  });

  if (c.agentImage) {
    await guard("agent image", async () => {
      const img = ecrImage(c.agentImage);
      if (!img) return [{ check: "agent image", status: "warn", detail: `${c.agentImage} is not in ECR: its digest is not checked`, fix: "" }];
      try {
        await cli(["ecr", "describe-images", "--registry-id", img.account, "--repository-name", img.repository, "--image-ids", `imageDigest=${img.digest}`]);
      } catch (err) {
        const code = (err as AwsCliError).code;
        if (code !== "ImageNotFoundException" && code !== "RepositoryNotFoundException") throw err;
        return [{ check: "agent image", status: "missing", detail: `${img.digest} is not in ${img.repository} (${code})`, fix: "build agent/Dockerfile, push it to that repository and set llm-ha:agentImage to the pushed digest (or llm-ha:agentImageBuild: true)" }];
      }
      return [{ check: "agent image", status: "ok", detail: `${img.repository}@${img.digest.slice(0, 19)}… exists`, fix: "" }];
    });
  }

  await guard(WEIGHTS_CHECK, () => weightsRows(c, cli));

  await guard(CERTIFICATE_CHECK, () => certificateRows(c, cli));
  await guard(PULL_THROUGH_SECRET_CHECK, () => pullThroughSecretRows(c, cli));
  await guard(PROMETHEUS_CHECK, () => prometheusRows(c, cli));
  // An adopted Redis or MSK: what llm-ha relies on there, the operator's to set.
  await adoptedDataChecks(c, cli, guard);
}
