/**
 * Where DNS sends the clients after an AZ is lost (L3, as Route53's weighted records do in
 * the stack): many single resolutions of the service name against PowerDNS, counted per AZ,
 * against each healthy AZ's fair share, its weight (configured capacity) over the healthy
 * AZs' weights. A failover pair per AZ sent a lost AZ's whole share to one neighbour (2/3 of
 * the answers with 3 AZs: 1.33 × its fair share).
 */
import { sleep } from "../../../agent/src/util/net";
import type { ScenarioContext } from "./runner";

export interface DnsSpread {
  /** Share of the answers per AZ name (the lost one included). */
  shares: Record<string, number>;
  /** Healthy AZs' fair shares. */
  fair: Record<string, number>;
  /** Largest share over fair share among the healthy AZs; null with no healthy AZ. */
  ratio: number | null;
  answers: number;
}

/** Pure: the figures from answer counts per AZ, the AZs' weights and the healthy AZs (by `/az/health`). */
export function dnsSpreadOf(counts: Record<string, number>, weights: Record<string, number>, healthy: readonly string[]): DnsSpread {
  const answers = Object.values(counts).reduce((a, b) => a + b, 0);
  const shares = Object.fromEntries(Object.keys(weights).map((az) => [az, answers ? (counts[az] ?? 0) / answers : 0]));
  const total = healthy.reduce((n, az) => n + (weights[az] ?? 0), 0);
  const fair = Object.fromEntries(healthy.map((az) => [az, total ? (weights[az] ?? 0) / total : 0]));
  const ratios = healthy.filter((az) => fair[az] > 0).map((az) => shares[az] / fair[az]);
  return { shares, fair, ratio: answers && ratios.length ? Math.max(...ratios) : null, answers };
}

async function azHealthy(ctx: ScenarioContext): Promise<string[]> {
  const up = await Promise.all(
    ctx.stack.azs.map(async (a) => {
      try {
        const r = await fetch(`http://${a.address}:${ctx.stack.azHealthPort}/az/health`, { signal: AbortSignal.timeout(1000) });
        await r.arrayBuffer();
        return r.status === 200 ? a.name : null;
      } catch {
        return null;
      }
    }),
  );
  return up.filter((x): x is string => x !== null).sort();
}

/** Waits until every AZ in `names` passes `/az/health` (a woken standby once it serves); false after `ms`. */
export async function waitAzsHealthy(ctx: ScenarioContext, names: readonly string[], ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const up = await azHealthy(ctx);
    if (names.every((n) => up.includes(n))) return true;
    await sleep(250);
  }
  return false;
}

/**
 * Samples `n` resolutions while the set of AZs passing `/az/health` holds still (a standby
 * waking mid-sample mixes two spreads: tried again, at most 3 times; after PowerDNS's 1 s
 * check interval, so its view matches the probe's).
 */
export async function measureDnsSpread(ctx: ScenarioContext, n = 600): Promise<DnsSpread & { healthy: string[] }> {
  const weights = Object.fromEntries(ctx.stack.azs.map((a) => [a.name, ctx.stack.nodes.filter((x) => x.az === a.name).length]));
  const byAddress = new Map(ctx.stack.azs.map((a) => [a.address, a.name]));
  let last: (DnsSpread & { healthy: string[] }) | null = null;
  for (let i = 0; i < 3; i++) {
    const before = await azHealthy(ctx);
    await sleep(1200);
    const raw = await ctx.stack.dns.sample(n);
    const after = await azHealthy(ctx);
    const counts: Record<string, number> = {};
    for (const [ip, k] of Object.entries(raw)) {
      const az = byAddress.get(ip);
      if (az) counts[az] = (counts[az] ?? 0) + k;
    }
    last = { ...dnsSpreadOf(counts, weights, after), healthy: after };
    if (before.join() === after.join()) break;
  }
  return last!;
}
