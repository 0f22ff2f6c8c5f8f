/**
 * The Route53 health checkers' ranges the stack admits on :8081 come from a committed snapshot
 * (contracts/route53-healthcheck-ranges.json). `llm-ha preflight --online` compares it with the
 * live ip-ranges.json and warns, with the command that refreshes it, when AWS has changed them:
 * a checker address the NLBs do not admit times out, and enough of them fail a healthy AZ.
 *
 * Run as a script (`npx tsx infra/preflight/route53-ranges.ts --write`) it rewrites the snapshot
 * from the live file.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { healthCheckRangesOf, IP_RANGES_URL, rangesDrift, REFRESH_COMMAND, ROUTE53_HEALTHCHECK_SNAPSHOT, type HealthCheckRanges } from "../../contracts/route53-ranges";
import type { CheckRow } from "./checks";

/** Reads the live ip-ranges.json (parsed). */
export type IpRangesFetch = () => Promise<unknown>;

export const fetchIpRanges: IpRangesFetch = async () => {
  const r = await fetch(IP_RANGES_URL, { signal: AbortSignal.timeout(15_000) });
  if (!r.ok) throw new Error(`GET ${IP_RANGES_URL}: HTTP ${r.status}`);
  return r.json();
};

/** The preflight row: the snapshot against the live file. Never blocking: a failed download or a drift is a warning. */
export async function route53RangesRow(get: IpRangesFetch, committed: HealthCheckRanges = ROUTE53_HEALTHCHECK_SNAPSHOT): Promise<CheckRow> {
  const check = "route53 checker ranges";
  const snap = `snapshot syncToken ${committed.syncToken} (${committed.createDate})`;
  let live: HealthCheckRanges;
  try {
    live = healthCheckRangesOf(await get());
  } catch (err) {
    return { check, status: "warn", detail: `could not read ${IP_RANGES_URL} (${(err as Error).message}); ${snap} not compared`, fix: `run preflight --online where ${IP_RANGES_URL} is reachable` };
  }
  const { added, removed } = rangesDrift(live, committed);
  if (added.length === 0 && removed.length === 0) {
    return { check, status: "ok", detail: `${snap} matches the live file (syncToken ${live.syncToken})`, fix: "" };
  }
  const what = [added.length ? `new: ${added.join(", ")}` : "", removed.length ? `gone: ${removed.join(", ")}` : ""].filter(Boolean).join("; ");
  return {
    check,
    status: "warn",
    detail: `the health checkers' ranges changed since the ${snap} (live syncToken ${live.syncToken}): ${what}; the NLBs' :8081 admits the snapshot's only`,
    fix: `${REFRESH_COMMAND}, commit contracts/route53-healthcheck-ranges.json, then pulumi up`,
  };
}

/** `--write`: the live file's ranges into the snapshot. */
async function main(argv: string[]): Promise<number> {
  if (!argv.includes("--write")) {
    process.stdout.write(`Usage: ${REFRESH_COMMAND}\nRewrites contracts/route53-healthcheck-ranges.json from ${IP_RANGES_URL}.\n`);
    return argv.includes("-h") || argv.includes("--help") ? 0 : 2;
  }
  const live = healthCheckRangesOf(await fetchIpRanges());
  const file = path.resolve(__dirname, "../../contracts/route53-healthcheck-ranges.json");
  fs.writeFileSync(file, JSON.stringify({ source: IP_RANGES_URL, service: "ROUTE53_HEALTHCHECKS", ...live }, null, 2) + "\n");
  const { added, removed } = rangesDrift(live);
  process.stdout.write(`${file}: syncToken ${live.syncToken} (${live.createDate}); ${added.length} added, ${removed.length} removed\n`);
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`route53-ranges: ${(err as Error).message}\n`);
      process.exit(1);
    },
  );
}
