/**
 * The drill's client API keys. Every request the drill sends through an AZ proxy
 * authenticates, as an application behind the public edge must: one tenant per client
 * class, made in the drill's Redis by `startStack` (one stack per process) and copied into
 * the proxies' maps by the same `EdgeSync` that runs in an L1 pod.
 */
/** `gameday`: the game-day runner's own clients (`llm-ha gameday --local`), as an operator makes one key for it in a real stack. */
export const DRILL_TENANTS = ["app", "sdk", "ops", "gameday"] as const;
export type DrillTenant = (typeof DRILL_TENANTS)[number];

const keys: Record<DrillTenant, string> = { app: "", sdk: "", ops: "", gameday: "" };

export function setDrillKey(tenant: DrillTenant, key: string): void {
  keys[tenant] = key;
}

/** The tenant's key; a placeholder before the stack made one (a proxy without the edge ignores it). */
export function drillKey(tenant: DrillTenant): string {
  return keys[tenant] || "llm-ha-drill-no-key";
}

/** `Authorization` of the tenant, as headers. */
export function drillAuth(tenant: DrillTenant): { authorization: string } {
  return { authorization: `Bearer ${drillKey(tenant)}` };
}
