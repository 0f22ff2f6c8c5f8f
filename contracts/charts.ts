/**
 * How a Helm chart reference carries its digest, for the program that installs a chart and
 * the policy that checks it (`charts-by-digest`). A chart named by version only is whatever
 * archive its repository serves that day: a re-published archive would be installed without
 * anyone noticing. The program installs a packaged archive only after checking its sha256,
 * from a folder named by that digest (`…/sha256-<64 hex>/<chart>-<version>.tgz`), or an OCI
 * reference by digest (`oci://…@sha256:<64 hex>`).
 */

const HEX = /^[0-9a-f]{64}$/;
const ARCHIVE = /(?:^|[\\/])sha256-([0-9a-f]{64})[\\/]([^\\/]+)\.tgz$/;
const OCI = /^oci:\/\/.+@sha256:([0-9a-f]{64})$/;

/** Where a verified archive lies under `root`: its folder names the digest it was checked against. */
export function verifiedArchivePath(root: string, digest: string, archive: string): string {
  const hex = digest.replace(/^sha256:/, "");
  if (!HEX.test(hex)) throw new ChartDigestFormatError(`${digest} is not a sha256 digest (sha256:<64 hex>)`);
  return `${root.replace(/[\\/]+$/, "")}/sha256-${hex}/${archive}`;
}

/** What a Release's `chart` says about its own content. */
export interface ChartReference {
  /** `archive`: a packaged chart by path; `oci`: a registry reference; `name`: a chart of a repository, by name and version. */
  kind: "archive" | "oci" | "name";
  /** `sha256:<64 hex>` the reference is pinned to, or null. */
  digest: string | null;
}

export function chartReference(chart: string): ChartReference {
  const oci = OCI.exec(chart);
  if (oci) return { kind: "oci", digest: `sha256:${oci[1]}` };
  if (chart.startsWith("oci://")) return { kind: "oci", digest: null };
  const archive = ARCHIVE.exec(chart);
  if (archive) return { kind: "archive", digest: `sha256:${archive[1]}` };
  return { kind: /\.tgz$/.test(chart) ? "archive" : "name", digest: null };
}

/**
 * The chart's name whatever form its reference takes: `aws-load-balancer-controller` from a name,
 * `…/aws-load-balancer-controller-3.5.0.tgz`, or `oci://…/aws-load-balancer-controller@sha256:…`.
 */
export function chartNameOf(chart: string, version?: string): string {
  const last = chart.replace(/@sha256:[0-9a-f]+$/, "").split(/[\\/]/).pop() ?? chart;
  if (!last.endsWith(".tgz")) return last.replace(/:[^:]+$/, "");
  const base = last.slice(0, -".tgz".length);
  if (version && base.endsWith(`-${version}`)) return base.slice(0, -(version.length + 1));
  return base.replace(/-v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$/, "");
}

export class ChartDigestFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChartDigestFormatError";
  }
}
