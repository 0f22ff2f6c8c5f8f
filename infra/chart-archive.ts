/**
 * A Helm chart installed as exactly the archive that was reviewed, or not at all. Helm itself
 * installs whatever archive a repository serves under a name and version (it does not check the
 * index's digest), so the program fetches the archive, checks its sha256 against the digest
 * pinned beside the version, keeps it in a cache folder named by that digest, and hands Helm the
 * local path (contracts/charts.ts). `pulumi preview` and `pulumi up` both run this before the
 * Release is registered: a mismatch stops either one, naming both digests.
 */
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { verifiedArchivePath } from "../contracts/charts";

/** A chart pinned by version and by the sha256 of its archive. */
export interface PinnedChart {
  readonly chart: string;
  readonly version: string;
  /** The Helm repository (HTTP) that serves `<chart>-<version>.tgz` (its index.yaml lists the same `digest`). */
  readonly repo: string;
  /** `sha256:<64 hex>` of the archive. */
  readonly digest: string;
  /** `llm-ha:charts.<setting>`: the path of a copy already on the runner. */
  readonly setting: string;
  /** Where the pin is written (`LB_CONTROLLER_CHART in infra/lb-controller.ts`), for the message that asks to change it. */
  readonly pinnedIn: string;
}

export interface ChartArchiveOptions {
  /** A copy of the archive already on this machine (`llm-ha:charts.<setting>`): checked the same way, nothing downloaded. */
  archivePath?: string;
  /** Where verified archives are kept, one folder per digest. Default `chartCacheDir()`. */
  cacheDir?: string;
  /** Fetches the archive's bytes. Default `downloadArchive` (HTTPS); tests inject one. */
  download?: (url: string) => Promise<Uint8Array>;
}

/** Refuses a chart archive larger than this: the controller's is about 50 KB. */
export const MAX_ARCHIVE_BYTES = 10 * 1024 * 1024;
const DOWNLOAD_TIMEOUT_MS = 60_000;

/** `<chart>-<version>.tgz`, as `helm package` names it and the repository's index lists it. */
export function archiveName(c: PinnedChart): string {
  return `${c.chart}-${c.version}.tgz`;
}

/** The archive's URL in its repository. */
export function archiveUrl(c: PinnedChart): string {
  return `${c.repo.replace(/\/+$/, "")}/${archiveName(c)}`;
}

/** The user's cache folder for verified charts: `$XDG_CACHE_HOME` (or the OS's) `/llm-ha/helm-charts`. */
export function chartCacheDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform, home = os.homedir()): string {
  const base =
    env.XDG_CACHE_HOME ||
    (platform === "darwin" ? path.join(home, "Library", "Caches") : platform === "win32" ? (env.LOCALAPPDATA ?? path.join(home, "AppData", "Local")) : path.join(home, ".cache"));
  return path.join(base, "llm-ha", "helm-charts");
}

export function sha256Of(bytes: Uint8Array): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/**
 * The local path of the verified archive of `c`: from the cache when it holds it (checked
 * again), else from `archivePath` or the repository, checked, then written to the cache.
 * Rejects with `ChartDigestError` when the bytes are not the pinned ones (nothing is cached),
 * `ChartFetchError` when they cannot be had.
 */
export async function verifiedChartArchive(c: PinnedChart, opts: ChartArchiveOptions = {}): Promise<string> {
  const target = verifiedArchivePath(opts.cacheDir ?? chartCacheDir(), c.digest, archiveName(c));
  const cached = await readIfPresent(target);
  if (cached !== undefined && sha256Of(cached) === c.digest) return target;

  let bytes: Uint8Array;
  let source: string;
  if (opts.archivePath !== undefined) {
    source = opts.archivePath;
    const given = await readIfPresent(source);
    if (given === undefined) throw new ChartFetchError(`${source} (${settingKey(c)}) does not exist: copy ${archiveUrl(c)} there, or unset ${settingKey(c)} to download it`);
    bytes = given;
  } else {
    source = archiveUrl(c);
    try {
      bytes = await (opts.download ?? downloadArchive)(source);
    } catch (e) {
      if (e instanceof ChartFetchError) throw e;
      throw new ChartFetchError(`${source}: ${(e as Error).message}; on a runner without internet, copy the archive onto it and set ${settingKey(c)} to its path`);
    }
  }
  const got = sha256Of(bytes);
  if (got !== c.digest) throw new ChartDigestError(c, source, got);

  // Written beside, then renamed: a concurrent run never reads half an archive.
  await fs.mkdir(path.dirname(target), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  await fs.writeFile(tmp, bytes, { mode: 0o644 });
  await fs.rename(tmp, target);
  return target;
}

async function readIfPresent(file: string): Promise<Uint8Array | undefined> {
  try {
    return await fs.readFile(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/** `llm-ha:charts.<setting>`. */
export function settingKey(c: PinnedChart): string {
  return `llm-ha:charts.${c.setting}`;
}

/** The archive over HTTPS, bounded in time and size. */
export async function downloadArchive(url: string): Promise<Uint8Array> {
  const res = await fetch(url, { signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS), redirect: "follow" });
  if (!res.ok) throw new ChartFetchError(`${url}: HTTP ${res.status} ${res.statusText}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (bytes.byteLength > MAX_ARCHIVE_BYTES) throw new ChartFetchError(`${url}: ${bytes.byteLength} bytes, more than a chart archive (${MAX_ARCHIVE_BYTES})`);
  return bytes;
}

/** The archive's bytes are not the ones pinned: the stack installs nothing. */
export class ChartDigestError extends Error {
  constructor(
    readonly chart: PinnedChart,
    readonly source: string,
    readonly actual: string,
  ) {
    super(
      `${archiveName(chart)} from ${source} has ${actual}, not the pinned ${chart.digest} (${chart.pinnedIn}): ` +
        `it was re-published, altered or truncated, and nothing was installed. Compare it with the digest in ${chart.repo}/index.yaml and the chart's release; ` +
        `change the pin only after reviewing that archive, or set ${settingKey(chart)} to a copy that has the pinned digest.`,
    );
    this.name = "ChartDigestError";
  }
}

/** The archive could not be read or downloaded. */
export class ChartFetchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChartFetchError";
  }
}
