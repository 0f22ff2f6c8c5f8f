/**
 * The manifest of a model's copy in S3: what the copy step writes beside the files
 * (`s3://<bucket>/<prefix>/llm-ha-manifest.json`) and what `llm-ha preflight --online` reads
 * back to tell which Hugging Face commit the copy holds and whether every file arrived.
 *
 *   { "version": 1, "repo": "meta-llama/Llama-3.1-70B-Instruct", "revision": "<40 hex>",
 *     "files": [{ "name": "config.json", "size": 855, "sha256": "…" }, …] }
 *
 * `name` is the path under the prefix; `sha256` is optional (hashing ~140 GB takes minutes).
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

/** The manifest's object name, directly under the weights prefix. */
export const WEIGHTS_MANIFEST = "llm-ha-manifest.json";

export interface WeightsFile {
  name: string;
  size: number;
  sha256?: string;
}

export interface WeightsManifest {
  version: 1;
  repo: string;
  revision: string;
  files: WeightsFile[];
}

/** Local files that are no part of the model: the hub client's bookkeeping and the manifest itself. */
const SKIP = (rel: string) => rel === WEIGHTS_MANIFEST || rel.startsWith(".cache/") || rel.startsWith(".git/") || rel.endsWith(".lock");

/** A manifest's text checked field by field; a string says what is wrong with it. */
export function parseManifest(text: string): WeightsManifest | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return `${WEIGHTS_MANIFEST} is not JSON`;
  }
  const o = v as Partial<WeightsManifest> | null;
  if (typeof o !== "object" || o === null) return `${WEIGHTS_MANIFEST} is not an object`;
  if (typeof o.repo !== "string" || o.repo === "") return `${WEIGHTS_MANIFEST} names no repo`;
  if (typeof o.revision !== "string" || o.revision === "") return `${WEIGHTS_MANIFEST} names no revision`;
  if (!Array.isArray(o.files) || !o.files.every((f) => typeof f?.name === "string" && Number.isInteger(f.size) && f.size >= 0)) {
    return `${WEIGHTS_MANIFEST} has no list of files with name and size`;
  }
  return { version: 1, repo: o.repo, revision: o.revision, files: o.files.map((f) => ({ name: f.name, size: f.size, ...(typeof f.sha256 === "string" ? { sha256: f.sha256 } : {}) })) };
}

function sha256Of(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash("sha256");
    fs.createReadStream(file)
      .on("data", (d) => h.update(d))
      .on("error", reject)
      .on("end", () => resolve(h.digest("hex")));
  });
}

/** The manifest of a local download of `repo` at `revision` (every file under `dir`, sorted by name). */
export async function buildManifest(dir: string, repo: string, revision: string, o: { sha256?: boolean } = {}): Promise<WeightsManifest> {
  const files: WeightsFile[] = [];
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(r);
      else if (e.isFile() && !SKIP(r)) files.push({ name: r, size: fs.statSync(path.join(dir, r)).size });
    }
  };
  walk("");
  files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (o.sha256) for (const f of files) f.sha256 = await sha256Of(path.join(dir, f.name));
  return { version: 1, repo, revision, files };
}

/** Total bytes of the files a manifest lists. */
export const manifestBytes = (m: WeightsManifest): number => m.files.reduce((n, f) => n + f.size, 0);

/**
 * The copy step, as commands to paste: download `repo` at `revision` from the hub (once, on an
 * operator's machine with the hub token), write the manifest, sync to the prefix (the manifest
 * last, so a copy cut short has none and preflight blocks it).
 */
export function copySteps(repo: string, revision: string, uri: string): string {
  const dir = `./${repo.split("/").pop()}`;
  const to = uri.replace(/\/+$/, "");
  return [
    `huggingface-cli download ${repo} --revision ${revision} --local-dir ${dir} --exclude 'original/*'`,
    `llm-ha weights manifest ${dir} --repo ${repo} --revision ${revision}`,
    `aws s3 sync ${dir} ${to} --exclude '.cache/*' --exclude ${WEIGHTS_MANIFEST}`,
    `aws s3 cp ${dir}/${WEIGHTS_MANIFEST} ${to}/${WEIGHTS_MANIFEST}`,
  ].join(" && ");
}
