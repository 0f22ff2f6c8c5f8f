/**
 * `llm-ha preflight --online`, model weights: the S3 copy the inference pods load is there,
 * complete, and of the pinned commit. Read through the `aws` CLI as the other online checks
 * (infra/preflight/aws-cli.ts): the listing of the prefix, then its manifest
 * (infra/weights/manifest.ts), written by the copy step after every file.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { StackConfig } from "../config";
import { copySteps, manifestBytes, parseManifest, WEIGHTS_MANIFEST } from "../weights/manifest";
import { parseS3Uri } from "../weights-iam";
import type { AwsCli, AwsCliError } from "./aws-cli";
import type { CheckRow } from "./checks";

export const WEIGHTS_CHECK = "model weights";

type Obj = Record<string, unknown>;
const gb = (bytes: number): string => `${(bytes / 1e9).toFixed(1)} GB`;

/** `s3api get-object` into a temporary file, as the CLI writes an object's body; undefined when there is none. */
async function readObject(cli: AwsCli, bucket: string, key: string): Promise<string | undefined> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "llmha-weights-"));
  const file = path.join(dir, "body");
  try {
    await cli(["s3api", "get-object", "--bucket", bucket, "--key", key, file]);
    return fs.readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as AwsCliError).code;
    if (code === "NoSuchKey" || code === "404") return undefined;
    throw err;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function weightsRows(c: StackConfig, cli: AwsCli): Promise<CheckRow[]> {
  const row = (status: CheckRow["status"], detail: string, fix = ""): CheckRow[] => [{ check: WEIGHTS_CHECK, status, detail, fix }];
  const uri = c.inference.weightsS3Uri;
  if (!uri) {
    return row("warn", "llm-ha:inference.weightsS3Uri is not set: every new node pulls the model from the Hugging Face hub through the NAT gateway", "copy the weights to S3 and set llm-ha:inference.weightsS3Uri (a wake must fit llm-ha:practiceWake.budgetMinutes)");
  }
  const { bucket, prefix } = parseS3Uri(uri);
  const revision = c.inference.revision ?? "";
  const fix = copySteps(c.inference.model, revision || "<commit>", uri);
  const r = (await cli(["s3api", "list-objects-v2", "--bucket", bucket, "--prefix", prefix ? `${prefix}/` : ""])) as Obj;
  const listed = new Map<string, number>();
  for (const o of Array.isArray(r.Contents) ? (r.Contents as Obj[]) : []) listed.set(String(o.Key).slice(prefix ? prefix.length + 1 : 0), Number(o.Size ?? 0));
  if (listed.size === 0) return row("missing", `nothing under ${uri}`, fix);
  const text = await readObject(cli, bucket, prefix ? `${prefix}/${WEIGHTS_MANIFEST}` : WEIGHTS_MANIFEST);
  if (text === undefined) return row("missing", `${uri} has ${listed.size} objects but no ${WEIGHTS_MANIFEST}: which commit it holds, and whether the copy finished, cannot be told`, fix);
  const m = parseManifest(text);
  if (typeof m === "string") return row("invalid", `${uri}: ${m}`, fix);
  if (m.repo !== c.inference.model) return row("invalid", `${uri} holds ${m.repo}, not ${c.inference.model} (llm-ha:inference.model)`, fix);
  if (m.revision !== revision) {
    return row("invalid", `${uri} holds ${m.repo}@${m.revision}; llm-ha:inference.revision pins ${revision}`, `${fix} (or, if that copy is the one to serve: pulumi config set --path 'llm-ha:inference.revision' ${m.revision})`);
  }
  const bad = m.files.filter((f) => listed.get(f.name) !== f.size);
  if (bad.length) {
    const first = bad[0];
    const seen = listed.get(first.name);
    return row("invalid", `${uri} is incomplete: ${bad.length} of ${m.files.length} files in the manifest are missing or of another size (${first.name}: ${seen === undefined ? "missing" : `${seen} B`}, manifest ${first.size} B)`, fix);
  }
  // The streamer (the default load) reads safetensors only.
  if (c.inference.weightsLoad === "stream" && !m.files.some((f) => f.name.endsWith(".safetensors"))) {
    return row("invalid", `${uri} has no .safetensors files: vLLM's Run:ai streamer loads safetensors only`, `copy a safetensors revision, or set llm-ha:inference.weightsLoad: sync`);
  }
  return row("ok", `${uri} holds ${m.repo}@${m.revision.slice(0, 12)}: ${m.files.length} files, ${gb(manifestBytes(m))}`);
}
