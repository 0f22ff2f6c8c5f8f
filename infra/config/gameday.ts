import { GAMEDAY_SCENARIOS, windowProblem, type GamedayScenario, type GamedayWindow } from "../../contracts/gameday";
import { objectSetting, type Obj, type Settings } from "./read";

/** The region whose CloudWatch holds Route53's health-check metrics, which the stop alarms watch. */
export const ROUTE53_METRICS_REGION = "us-east-1";

/** Longest fault an experiment holds, in minutes. */
export const MAX_GAMEDAY_MINUTES = 60;

/**
 * `llm-ha:gameday`: AWS FIS experiment templates for the drill scenarios that have a cloud form
 * (docs/infra.md "Game day"). Off unless `enabled: true`; nothing runs until someone starts an
 * experiment.
 */
export interface GamedayConfig {
  enabled: boolean;
  /** The templates to create. Default every scenario. */
  scenarios: GamedayScenario[];
  /** The AZ the AZ-wide scenarios (and `gpu-lost`'s instance) take: an active AZ. Default the first active AZ. */
  az: string;
  /** The AZ `redis-failover` interrupts: where the Redis primary is. Default the first AZ (where ElastiCache places it first). */
  redisAz: string;
  /** How long each fault holds, 1–60 minutes. Default 10. */
  durationMinutes: number;
  /**
   * When `llm-ha gameday` may start an experiment (`{days, from, to, timeZone}`), e.g. Tuesday to
   * Thursday 10:00–16:00 in the on-call team's zone. No default: without one it starts none.
   */
  window?: GamedayWindow;
}

const KEYS = ["enabled", "scenarios", "az", "redisAz", "durationMinutes", "window"];

/** `llm-ha:gameday`, validated against the stack's AZs and region; every problem names its key. */
export function gamedayOf(s: Settings, azs: string[], standbyAz: string | undefined, region: string): GamedayConfig {
  const { p, key } = s;
  const g = gamedayObject(s);
  const active = azs.filter((a) => a !== standbyAz);
  const off: GamedayConfig = { enabled: false, scenarios: [], az: active[0] ?? "", redisAz: azs[0] ?? "", durationMinutes: 10 };
  for (const k of Object.keys(g)) if (!KEYS.includes(k)) p.add(key(`gameday.${k}`), `unknown setting; known: ${KEYS.join(", ")}`);
  if (g.enabled !== undefined && typeof g.enabled !== "boolean") p.add(key("gameday.enabled"), `${JSON.stringify(g.enabled)} must be true or false`);
  const enabled = g.enabled === true;

  let scenarios: GamedayScenario[] = [...GAMEDAY_SCENARIOS];
  if (g.scenarios !== undefined) {
    const list = Array.isArray(g.scenarios) ? g.scenarios : undefined;
    const unknown = (list ?? []).filter((x) => !GAMEDAY_SCENARIOS.includes(x as GamedayScenario));
    if (list === undefined || list.length === 0 || unknown.length > 0) {
      p.add(key("gameday.scenarios"), `${unknown.length > 0 ? `${unknown.map((x) => JSON.stringify(x)).join(", ")}: ` : ""}must be a non-empty list of ${GAMEDAY_SCENARIOS.join(", ")}`);
    } else scenarios = GAMEDAY_SCENARIOS.filter((x) => list.includes(x));
  }

  const az = azSetting(s, g, "az", active, off.az, `an active AZ of ${key("azs")} (${active.join(", ")}; the standby ${standbyAz ?? "—"} may sleep with nothing to lose)`);
  const redisAz = azSetting(s, g, "redisAz", azs, off.redisAz, `an AZ of ${key("azs")} (${azs.join(", ")})`);

  let durationMinutes = off.durationMinutes;
  if (g.durationMinutes !== undefined) {
    const d = g.durationMinutes;
    if (Number.isInteger(d) && (d as number) >= 1 && (d as number) <= MAX_GAMEDAY_MINUTES) durationMinutes = d as number;
    else p.add(key("gameday.durationMinutes"), `${JSON.stringify(d)} must be a whole number of minutes from 1 to ${MAX_GAMEDAY_MINUTES}`);
  }

  let window: GamedayWindow | undefined;
  if (g.window !== undefined) {
    const w = g.window as Partial<GamedayWindow> | null;
    const why = w && typeof w === "object" && !Array.isArray(w) ? windowProblem({ days: w.days as GamedayWindow["days"], from: String(w.from ?? ""), to: String(w.to ?? ""), timeZone: String(w.timeZone ?? "UTC") }) : "must be an object {days, from, to, timeZone}";
    if (why) p.add(key("gameday.window"), `${JSON.stringify(g.window)}: ${why}`);
    else window = { days: w!.days as GamedayWindow["days"], from: String(w!.from), to: String(w!.to), timeZone: String(w!.timeZone ?? "UTC") };
  }

  // The stop alarms watch Route53's health checks, whose metrics CloudWatch keeps in us-east-1
  // only, and FIS reads its stop alarms in the experiment's own region.
  if (enabled && region !== "" && region !== ROUTE53_METRICS_REGION) {
    p.add(key("gameday.enabled"), `needs aws:region ${ROUTE53_METRICS_REGION} (got ${region}): the stop alarms watch Route53 health-check metrics, which exist only there`);
  }
  return enabled ? { enabled, scenarios, az, redisAz, durationMinutes, ...(window ? { window } : {}) } : off;
}

function azSetting(s: Settings, g: Obj, k: "az" | "redisAz", allowed: string[], dflt: string, what: string): string {
  const v = g[k];
  if (v === undefined) return dflt;
  if (typeof v === "string" && allowed.includes(v)) return v;
  s.p.add(s.key(`gameday.${k}`), `${JSON.stringify(v)} must be ${what}`);
  return dflt;
}

/** The `llm-ha:gameday` object, or `{}` (a bare value reported with the command meant). */
function gamedayObject(s: Settings): Obj {
  return objectSetting(s, "gameday", "{enabled, scenarios, az, redisAz, durationMinutes, window}", `pulumi config set --path '${s.key("gameday.enabled")}' true`);
}
