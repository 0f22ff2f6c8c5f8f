// The L3 zone tier's spread: where Route53 sends a lost AZ's share of DNS answers. Computed
// from the captured records as Route53 chooses among them (weighted records by weight among
// the healthy ones, zero weights only when no other is healthy, every record when none is;
// failover records PRIMARY while healthy, else SECONDARY; aliases that evaluate target health
// follow their target), with one AZ's health checks failing at a time.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { list, num, record, str, type Props } from "./props";

const RECORD_TYPE = "aws:route53/record:Record";
const DEPTH = 6;

/** Share of the answers per endpoint (a health check, or the target of an unchecked record). */
type Shares = Map<string, number>;

interface Resolved {
  shares: Shares;
  healthy: boolean;
}

function add(into: Shares, from: Shares, times: number): void {
  for (const [k, v] of from) into.set(k, (into.get(k) ?? 0) + v * times);
}

/** An endpoint is its health check where it has one (both records of a failover pair can carry the same AZ's check), else its target. */
function endpointOf(p: Props): string {
  const hc = str(p.healthCheckId);
  return hc ? `hc:${hc}` : `to:${str(list(p.records)[0]) ?? ""}`;
}

export class DnsAnswers {
  private readonly byName = new Map<string, Props[]>();
  /** Endpoint → a name to print (the first target seen with it). */
  readonly labels = new Map<string, string>();

  constructor(records: Props[]) {
    for (const p of records) {
      const k = `${str(p.zoneId) ?? ""}|${str(p.name) ?? ""}`;
      this.byName.set(k, [...(this.byName.get(k) ?? []), p]);
      // A SECONDARY names another AZ's target under this check only in a broken pair: any other record names it first.
      const secondary = str(record(list(p.failoverRoutingPolicies)[0])?.type) === "SECONDARY";
      if (!record(list(p.aliases)[0])) {
        const e = endpointOf(p);
        if (!this.labels.has(e) || !secondary) this.labels.set(e, str(list(p.records)[0]) ?? e);
      }
    }
  }

  /** Where Route53 sends the answers for `name` while the endpoints in `lost` fail their checks. */
  resolve(zoneId: string, name: string, lost: ReadonlySet<string>, depth = 0): Resolved {
    const rs = this.byName.get(`${zoneId}|${name}`) ?? [];
    if (rs.length === 0 || depth > DEPTH) return { shares: new Map(), healthy: false };
    const one = (p: Props): Resolved => this.one(p, lost, depth);
    if (rs.some((p) => list(p.weightedRoutingPolicies).length > 0)) {
      const all = rs.map((p) => ({ w: num(record(list(p.weightedRoutingPolicies)[0])?.weight) ?? 0, r: one(p) }));
      const healthy = all.filter((x) => x.r.healthy);
      let pick = healthy.filter((x) => x.w > 0);
      let byWeight = true;
      if (pick.length === 0) [pick, byWeight] = healthy.length ? [healthy, false] : [all, all.some((x) => x.w > 0)];
      const total = byWeight ? pick.reduce((n, x) => n + x.w, 0) : pick.length;
      const shares: Shares = new Map();
      for (const x of pick) if (total > 0 && (!byWeight || x.w > 0)) add(shares, x.r.shares, (byWeight ? x.w : 1) / total);
      return { shares, healthy: healthy.length > 0 };
    }
    const role = (t: string) => rs.find((p) => str(record(list(p.failoverRoutingPolicies)[0])?.type) === t);
    const primary = role("PRIMARY");
    if (primary) {
      const [pr, secondary] = [one(primary), role("SECONDARY")];
      if (pr.healthy || !secondary) return pr;
      const sr = one(secondary);
      return sr.healthy ? sr : { shares: pr.shares, healthy: false };
    }
    return one(rs[0]);
  }

  private one(p: Props, lost: ReadonlySet<string>, depth: number): Resolved {
    const alias = record(list(p.aliases)[0]);
    const hc = str(p.healthCheckId);
    const checked = hc ? !lost.has(`hc:${hc}`) : true;
    if (alias) {
      const t = this.resolve(str(alias.zoneId) ?? "", str(alias.name) ?? "", lost, depth + 1);
      // An alias to something outside the captured zone (a load balancer) is one endpoint of its own.
      const shares = t.shares.size ? t.shares : new Map([[`to:${str(alias.name) ?? ""}`, 1]]);
      return { shares, healthy: checked && (alias.evaluateTargetHealth === true && t.shares.size ? t.healthy : true) };
    }
    return { shares: new Map([[endpointOf(p), 1]]), healthy: checked };
  }
}

export interface SpreadConfig {
  maxShareRatio: number;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

export const dnsAzLossSpread: StackValidationPolicy = {
  name: "dns-az-loss-spread",
  description:
    "Losing any one AZ sends no remaining AZ more than 1.2 × its fair share of the service name's DNS answers (its share of the remaining capacity, from the records' weights), and every weighted record carries a health check (L3 zone tier: a failover pair per AZ sent a lost AZ's whole share to one neighbour, 2/3 of the answers with 3 AZs).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      maxShareRatio: { type: "number", minimum: 1, default: 1.2, description: "Largest answer share over fair share of a remaining AZ." },
    },
  },
  validateStack: (args, reportViolation) => {
    const { maxShareRatio } = args.getConfig<SpreadConfig>();
    const records: PolicyResource[] = args.resources.filter((r) => r.type === RECORD_TYPE);
    const answers = new DnsAnswers(records.map((r) => r.props as Props));
    const groups = new Map<string, PolicyResource[]>();
    for (const r of records) {
      const p = r.props as Props;
      if (list(p.weightedRoutingPolicies).length === 0) continue;
      const k = `${str(p.zoneId) ?? ""}|${str(p.name) ?? ""}`;
      groups.set(k, [...(groups.get(k) ?? []), r]);
      const alias = record(list(p.aliases)[0]);
      if (!str(p.healthCheckId) && !(alias && alias.evaluateTargetHealth === true)) {
        reportViolation(`Weighted record ${r.name} (${str(p.name) ?? ""}) has no healthCheckId: Route53 keeps answering its AZ when that AZ is lost.`, r.urn);
      }
    }
    for (const [k, rs] of groups) {
      const [zoneId, name] = k.split("|");
      const base = answers.resolve(zoneId, name, new Set()).shares;
      const endpoints = [...base].filter(([, v]) => v > 0).map(([e]) => e);
      for (const gone of endpoints.filter((e) => e.startsWith("hc:"))) {
        const after = answers.resolve(zoneId, name, new Set([gone])).shares;
        const left = endpoints.filter((e) => e !== gone);
        const leftBase = left.reduce((n, e) => n + base.get(e)!, 0);
        let worst: { e: string; share: number; fair: number } | undefined;
        for (const e of left) {
          const share = after.get(e) ?? 0;
          const fair = base.get(e)! / leftBase;
          if (share > maxShareRatio * fair + 1e-9 && (!worst || share / fair > worst.share / worst.fair)) worst = { e, share, fair };
        }
        if (!worst) continue;
        const label = (e: string) => answers.labels.get(e) ?? e;
        reportViolation(
          `Losing ${label(gone)} sends ${pct(worst.share)} of ${name}'s DNS answers to ${label(worst.e)}, ${(worst.share / worst.fair).toFixed(2)} × its fair share of ${pct(worst.fair)} (at most ${maxShareRatio} ×): give the service name one weighted record per AZ, weighted by capacity, each with its own AZ's health check.`,
          rs[0].urn,
        );
      }
    }
  },
};
