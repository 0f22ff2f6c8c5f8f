/**
 * What the game-day runner watches, in the cloud: the stack's Route53 health checks (an AZ the
 * public name serves is one whose check Route53 counts healthy) and the fleet's keys in the
 * stack's Redis (read with the operator's credentials, as `llm-ha status` reads them). The lab's
 * view (`--local`) answers the same questions from the drill's DNS and Redis (local.ts).
 */
import { GetHealthCheckStatusCommand, ListHealthChecksCommand, ListTagsForResourcesCommand, type Route53Client } from "@aws-sdk/client-route-53";
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { readFleet } from "../drill/observer";
import { GamedayError } from "./fis";
import type { GamedayView } from "./runner";

/**
 * Route53 calls an endpoint healthy when more than 18 % of its checkers report it healthy
 * (Route53 developer guide, "How Amazon Route 53 determines whether a health check is healthy").
 */
export const ROUTE53_HEALTHY_SHARE = 0.18;

/** The stack's health check per AZ: tagged `Environment=<env>` and `Name=<service> <az>` (infra/dns.ts). */
export async function findHealthChecks(r53: Route53Client, environment: string, azs: readonly string[]): Promise<Record<string, string>> {
  const ids: string[] = [];
  let marker: string | undefined;
  do {
    const page = await r53.send(new ListHealthChecksCommand({ Marker: marker, MaxItems: 100 }));
    for (const h of page.HealthChecks ?? []) if (h.Id && h.HealthCheckConfig?.ResourcePath === "/az/health") ids.push(h.Id);
    marker = page.IsTruncated ? page.NextMarker : undefined;
  } while (marker);
  const byAz: Record<string, string> = {};
  for (let i = 0; i < ids.length; i += 10) {
    const tags = await r53.send(new ListTagsForResourcesCommand({ ResourceType: "healthcheck", ResourceIds: ids.slice(i, i + 10) }));
    for (const set of tags.ResourceTagSets ?? []) {
      const t = Object.fromEntries((set.Tags ?? []).map((x) => [x.Key ?? "", x.Value ?? ""]));
      if (t.Environment !== environment || !set.ResourceId) continue;
      const az = azs.find((a) => (t.Name ?? "").endsWith(` ${a}`));
      if (az) byAz[az] = set.ResourceId;
    }
  }
  const missing = azs.filter((a) => !byAz[a]);
  if (missing.length) throw new GamedayError(`no Route53 health check on /az/health tagged Environment=${environment} for ${missing.join(", ")}: is the stack's DNS deployed (llm-ha:dns)?`);
  return byAz;
}

/** The AZs whose health check Route53 counts healthy now. */
export async function route53Serving(r53: Route53Client, checks: Record<string, string>): Promise<string[]> {
  const out: string[] = [];
  await Promise.all(
    Object.entries(checks).map(async ([az, id]) => {
      const s = await r53.send(new GetHealthCheckStatusCommand({ HealthCheckId: id }));
      const obs = s.HealthCheckObservations ?? [];
      const ok = obs.filter((o) => (o.StatusReport?.Status ?? "").startsWith("Success")).length;
      if (obs.length > 0 && ok / obs.length > ROUTE53_HEALTHY_SHARE) out.push(az);
    }),
  );
  return out.sort();
}

/** The cloud's view: Route53's checks for the public answer, the stack's Redis for the fleet. */
export function cloudView(o: { r53: Route53Client; checks: Record<string, string>; redis: Redis; keys: RedisKeys; azs: readonly string[]; close(): Promise<void> }): GamedayView {
  return {
    servingAzs: () => route53Serving(o.r53, o.checks),
    fleet: () => readFleet(o.redis, o.keys, o.azs),
    close: o.close,
  };
}
