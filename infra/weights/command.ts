/**
 * `llm-ha weights manifest DIR --repo R --revision REV [--sha256]`: writes
 * DIR/llm-ha-manifest.json for a local download of the model, the file the S3 copy carries
 * and `llm-ha preflight --online` checks against `llm-ha:inference.revision`.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { buildManifest, manifestBytes, WEIGHTS_MANIFEST } from "./manifest";

const USAGE = `Usage: llm-ha weights manifest DIR --repo OWNER/NAME --revision COMMIT [--sha256]

Writes DIR/${WEIGHTS_MANIFEST}: the model repository, its revision (the 40-hex commit
huggingface-cli downloaded) and every file under DIR with its size (and sha256 with --sha256,
which reads every byte). Then copy DIR to the weights prefix, the manifest last:
  aws s3 sync DIR s3://<bucket>/<prefix> --exclude '.cache/*' --exclude ${WEIGHTS_MANIFEST}
  aws s3 cp DIR/${WEIGHTS_MANIFEST} s3://<bucket>/<prefix>/${WEIGHTS_MANIFEST}
(docs/infra.md "Wake path").

Exit status: 0 written, 2 bad arguments.
`;

export async function weightsCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { repo: { type: "string" }, revision: { type: "string" }, sha256: { type: "boolean" }, help: { type: "boolean", short: "h" } } });
  } catch (err) {
    process.stderr.write(`llm-ha weights: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const [verb, dir] = positionals;
  const problem =
    verb !== "manifest" ? "the only verb is manifest" : !dir || !fs.existsSync(dir) || !fs.statSync(dir).isDirectory() ? `${dir ?? "DIR"} is not a directory` : !values.repo ? "--repo is required" : !/^[0-9a-f]{40}$/.test(values.revision ?? "") ? "--revision must be the 40-hex commit" : null;
  if (problem) {
    process.stderr.write(`llm-ha weights: ${problem}\n${USAGE}`);
    return 2;
  }
  const m = await buildManifest(dir, values.repo!, values.revision!, { sha256: values.sha256 });
  const out = path.join(dir, WEIGHTS_MANIFEST);
  fs.writeFileSync(out, JSON.stringify(m, null, 1) + "\n");
  process.stdout.write(`${out}: ${m.repo}@${m.revision}, ${m.files.length} files, ${(manifestBytes(m) / 1e9).toFixed(2)} GB\n`);
  return 0;
}
