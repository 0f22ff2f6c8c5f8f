/**
 * The LB controller's chart is installed as exactly the pinned archive or not at all (issue
 * 25.5): downloaded or taken from the runner's copy, checked against the sha256 beside the
 * version, cached by digest. No network: the archive comes from an injected download, a file,
 * or an HTTP server on loopback.
 */
import { promises as fs } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chartNameOf, chartReference } from "../../contracts/charts";
import { captureStackGraph } from "../../infra/capture";
import {
  archiveUrl,
  chartCacheDir,
  ChartDigestError,
  ChartFetchError,
  downloadArchive,
  MAX_ARCHIVE_BYTES,
  sha256Of,
  verifiedChartArchive,
  type PinnedChart,
} from "../../infra/chart-archive";
import { LB_CONTROLLER_CHART } from "../../infra/lb-controller";

/** A stand-in archive: any bytes do, the check is on the digest. */
const BYTES = new TextEncoder().encode("aws-load-balancer-controller/Chart.yaml: version 3.5.0\n");
const OTHER = new TextEncoder().encode("a re-published archive\n");
const PINNED: PinnedChart = { ...LB_CONTROLLER_CHART, digest: sha256Of(BYTES) };

let tmp: string;
beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "llm-ha-charts-"));
});
afterAll(async () => {
  await fs.rm(tmp, { recursive: true, force: true });
});

/** A download that serves `bytes` and counts its calls. */
function served(bytes: Uint8Array) {
  const urls: string[] = [];
  return { urls, download: async (url: string) => (urls.push(url), bytes) };
}

const refusesDownload = async (url: string): Promise<Uint8Array> => {
  throw new Error(`no download expected (${url})`);
};

describe("the pinned LB controller chart", () => {
  it("is pinned by version and by the sha256 of its archive, fetched from the repository's own URL", () => {
    expect(LB_CONTROLLER_CHART.digest).toBe("sha256:45051f634b33e10baccb3354d0681b7de787c60445e599fa276e0c9aedd4ccd5");
    expect(archiveUrl(LB_CONTROLLER_CHART)).toBe("https://aws.github.io/eks-charts/aws-load-balancer-controller-3.5.0.tgz");
  });

  it("keeps verified archives in the user's cache folder", () => {
    expect(chartCacheDir({ XDG_CACHE_HOME: "/x/cache" }, "linux", "/home/u")).toBe("/x/cache/llm-ha/helm-charts");
    expect(chartCacheDir({}, "linux", "/home/u")).toBe("/home/u/.cache/llm-ha/helm-charts");
    expect(chartCacheDir({}, "darwin", "/Users/u")).toBe("/Users/u/Library/Caches/llm-ha/helm-charts");
  });
});

describe("verifiedChartArchive", () => {
  it("downloads the archive, checks it and returns its path in a folder named by the digest; later runs use the cache", async () => {
    const cacheDir = path.join(tmp, "ok");
    const net = served(BYTES);
    const file = await verifiedChartArchive(PINNED, { cacheDir, download: net.download });
    expect(file).toBe(path.join(cacheDir, `sha256-${PINNED.digest.slice(7)}`, "aws-load-balancer-controller-3.5.0.tgz"));
    expect(new Uint8Array(await fs.readFile(file))).toEqual(BYTES);
    expect(net.urls).toEqual(["https://aws.github.io/eks-charts/aws-load-balancer-controller-3.5.0.tgz"]);
    expect(chartReference(file)).toEqual({ kind: "archive", digest: PINNED.digest });
    expect(chartNameOf(file, "3.5.0")).toBe("aws-load-balancer-controller");

    expect(await verifiedChartArchive(PINNED, { cacheDir, download: refusesDownload })).toBe(file);
  });

  it("refuses an archive whose digest is not the pinned one, naming both and what to do, and caches nothing", async () => {
    const cacheDir = path.join(tmp, "mismatch");
    const err = await verifiedChartArchive(PINNED, { cacheDir, download: served(OTHER).download }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChartDigestError);
    expect((err as Error).message).toBe(
      `aws-load-balancer-controller-3.5.0.tgz from https://aws.github.io/eks-charts/aws-load-balancer-controller-3.5.0.tgz has ${sha256Of(OTHER)}, not the pinned ${PINNED.digest} ` +
        "(LB_CONTROLLER_CHART in infra/lb-controller.ts): it was re-published, altered or truncated, and nothing was installed. " +
        "Compare it with the digest in https://aws.github.io/eks-charts/index.yaml and the chart's release; change the pin only after reviewing that archive, " +
        "or set llm-ha:charts.lbControllerArchive to a copy that has the pinned digest.",
    );
    await expect(fs.readdir(cacheDir)).rejects.toThrow(/ENOENT/);
  });

  it("replaces a cached file that no longer has the digest (the cache is checked like a download)", async () => {
    const cacheDir = path.join(tmp, "stale");
    const file = await verifiedChartArchive(PINNED, { cacheDir, download: served(BYTES).download });
    await fs.writeFile(file, OTHER);
    const net = served(BYTES);
    expect(await verifiedChartArchive(PINNED, { cacheDir, download: net.download })).toBe(file);
    expect(net.urls).toHaveLength(1);
    expect(new Uint8Array(await fs.readFile(file))).toEqual(BYTES);
  });

  it("takes the runner's copy (llm-ha:charts.lbControllerArchive) without downloading, checked the same way", async () => {
    const cacheDir = path.join(tmp, "setting");
    const copy = path.join(tmp, "aws-load-balancer-controller-3.5.0.tgz");
    await fs.writeFile(copy, BYTES);
    const file = await verifiedChartArchive(PINNED, { cacheDir, archivePath: copy, download: refusesDownload });
    expect(new Uint8Array(await fs.readFile(file))).toEqual(BYTES);

    const altered = path.join(tmp, "altered.tgz");
    await fs.writeFile(altered, OTHER);
    const err = await verifiedChartArchive(PINNED, { cacheDir: path.join(tmp, "setting-bad"), archivePath: altered, download: refusesDownload }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChartDigestError);
    expect((err as Error).message).toMatch(new RegExp(`^aws-load-balancer-controller-3\\.5\\.0\\.tgz from ${altered} has ${sha256Of(OTHER)}, not the pinned ${PINNED.digest} `));

    const missing = await verifiedChartArchive(PINNED, { cacheDir: path.join(tmp, "setting-missing"), archivePath: path.join(tmp, "nope.tgz") }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ChartFetchError);
    expect((missing as Error).message).toBe(
      `${path.join(tmp, "nope.tgz")} (llm-ha:charts.lbControllerArchive) does not exist: copy https://aws.github.io/eks-charts/aws-load-balancer-controller-3.5.0.tgz there, or unset llm-ha:charts.lbControllerArchive to download it`,
    );
  });

  it("names the URL and the setting when the download fails", async () => {
    const err = await verifiedChartArchive(PINNED, {
      cacheDir: path.join(tmp, "offline"),
      download: async () => {
        throw new TypeError("fetch failed");
      },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChartFetchError);
    expect((err as Error).message).toBe(
      "https://aws.github.io/eks-charts/aws-load-balancer-controller-3.5.0.tgz: fetch failed; on a runner without internet, copy the archive onto it and set llm-ha:charts.lbControllerArchive to its path",
    );
  });
});

describe("downloadArchive over HTTP (loopback)", () => {
  let server: Server;
  let base: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === "/ok.tgz" || req.url === "/eks-charts/aws-load-balancer-controller-3.5.0.tgz") res.writeHead(200).end(Buffer.from(BYTES));
      else if (req.url === "/huge.tgz") res.writeHead(200).end(Buffer.alloc(MAX_ARCHIVE_BYTES + 1));
      else res.writeHead(404, "Not Found").end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("returns the body, refuses an error status and an oversized body", async () => {
    expect(await downloadArchive(`${base}/ok.tgz`)).toEqual(BYTES);
    await expect(downloadArchive(`${base}/gone.tgz`)).rejects.toThrow(new ChartFetchError(`${base}/gone.tgz: HTTP 404 Not Found`));
    await expect(downloadArchive(`${base}/huge.tgz`)).rejects.toThrow(`${base}/huge.tgz: ${MAX_ARCHIVE_BYTES + 1} bytes, more than a chart archive (${MAX_ARCHIVE_BYTES})`);
  });

  it("is what the stack uses to fetch and check a chart from a repository", async () => {
    const file = await verifiedChartArchive({ ...PINNED, repo: `${base}/eks-charts/` }, { cacheDir: path.join(tmp, "http") });
    expect(new Uint8Array(await fs.readFile(file))).toEqual(BYTES);
  });
});

describe("the stack's Release under mocks", () => {
  it("installs the archive the program checked: the runner's copy from llm-ha:charts reaches the check, its path reaches Helm", async () => {
    const calls: { chart: PinnedChart; archivePath: string | undefined }[] = [];
    const cacheDir = path.join(tmp, "stack");
    const copy = path.join(tmp, "stack-copy.tgz");
    await fs.writeFile(copy, BYTES);
    const { resources } = await captureStackGraph("dev", { "llm-ha:charts": JSON.stringify({ lbControllerArchive: copy }) }, undefined, {
      chartArchive: (chart, archivePath) => {
        calls.push({ chart, archivePath });
        // The real check over the runner's copy, pinned to that copy's digest (the real pin needs the real archive).
        return verifiedChartArchive({ ...chart, digest: PINNED.digest }, { cacheDir, archivePath, download: refusesDownload });
      },
    });
    expect(calls).toEqual([{ chart: LB_CONTROLLER_CHART, archivePath: copy }]);
    const release = resources.find((r) => r.type === "kubernetes:helm.sh/v3:Release")!;
    expect(release.props.chart).toBe(path.join(cacheDir, `sha256-${PINNED.digest.slice(7)}`, "aws-load-balancer-controller-3.5.0.tgz"));
    expect(release.props.repositoryOpts).toBeUndefined();
  });

  it("refuses before registering a single resource when the archive is not the pinned one", async () => {
    const err = await captureStackGraph("dev", {}, undefined, {
      chartArchive: (chart) => verifiedChartArchive(chart, { cacheDir: path.join(tmp, "stack-bad"), download: served(OTHER).download }),
    }).catch((e: unknown) => e);
    // The mock monitor of this run saw no registration at all.
    expect((pulumi.runtime.getMonitor() as unknown as { resources: Map<string, unknown> }).resources.size).toBe(0);
    expect(err).toBeInstanceOf(ChartDigestError);
    expect((err as Error).message).toContain(`has ${sha256Of(OTHER)}, not the pinned ${LB_CONTROLLER_CHART.digest} (LB_CONTROLLER_CHART in infra/lb-controller.ts)`);
  });
});
