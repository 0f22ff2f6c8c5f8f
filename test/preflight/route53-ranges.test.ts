/**
 * `llm-ha preflight --online` compares the committed Route53 checkers' snapshot with the live
 * ip-ranges.json (here a document in its shape: the tests reach no network) and warns, with the
 * refresh command, when AWS has moved them; a download that fails is a warning, never a block.
 */
import { describe, expect, it } from "vitest";
import { route53RangesRow } from "../../infra/preflight/route53-ranges";
import { REFRESH_COMMAND, ROUTE53_HEALTHCHECK_SNAPSHOT } from "../../contracts/route53-ranges";

/** A whole ip-ranges.json: the snapshot's entries among another service's, with `edit` applied. */
function liveFile(edit: (prefixes: { ip_prefix: string; region: string; service: string }[]) => void = () => {}): unknown {
  const prefixes = [
    { ip_prefix: "3.5.140.0/22", region: "ap-northeast-2", service: "AMAZON", network_border_group: "ap-northeast-2" },
    ...ROUTE53_HEALTHCHECK_SNAPSHOT.prefixes.map((p) => ({ ...p, service: "ROUTE53_HEALTHCHECKS", network_border_group: p.region })),
  ];
  edit(prefixes);
  return {
    syncToken: "1799999999",
    createDate: "2026-12-01-10-00-00",
    prefixes,
    ipv6_prefixes: ROUTE53_HEALTHCHECK_SNAPSHOT.ipv6_prefixes.map((p) => ({ ...p, service: "ROUTE53_HEALTHCHECKS", network_border_group: p.region })),
  };
}

describe("route53 checker ranges (preflight --online)", () => {
  it("ok when the live file holds the snapshot's ranges, whatever its syncToken", async () => {
    const row = await route53RangesRow(async () => liveFile());
    expect(row).toMatchObject({ check: "route53 checker ranges", status: "ok", fix: "" });
    expect(row.detail).toContain(`snapshot syncToken ${ROUTE53_HEALTHCHECK_SNAPSHOT.syncToken}`);
  });

  it("warns with the refresh command when a checker range was added or withdrawn", async () => {
    const row = await route53RangesRow(async () =>
      liveFile((ps) => {
        ps.push({ ip_prefix: "15.177.128.0/24", region: "us-east-1", service: "ROUTE53_HEALTHCHECKS" });
        ps.splice(ps.findIndex((p) => p.ip_prefix === "107.23.255.0/26"), 1);
      }),
    );
    expect(row.status).toBe("warn");
    expect(row.detail).toContain("new: 15.177.128.0/24; gone: 107.23.255.0/26");
    expect(row.fix).toContain(REFRESH_COMMAND);
  });

  it("ignores another partition's or service's changes", async () => {
    const row = await route53RangesRow(async () =>
      liveFile((ps) => {
        ps.push({ ip_prefix: "52.80.199.0/25", region: "cn-north-1", service: "ROUTE53_HEALTHCHECKS" });
        ps.push({ ip_prefix: "3.5.144.0/22", region: "us-east-1", service: "AMAZON" });
      }),
    );
    expect(row.status).toBe("ok");
  });

  it("warns, without blocking, when the file cannot be read or is not one", async () => {
    const down = await route53RangesRow(async () => {
      throw new Error("getaddrinfo ENOTFOUND ip-ranges.amazonaws.com");
    });
    expect(down).toMatchObject({ status: "warn" });
    expect(down.detail).toContain("ENOTFOUND");
    expect((await route53RangesRow(async () => ({ hello: "world" }))).status).toBe("warn");
  });
});
