import type { StackConfig } from "../config";
import { findPrice, type Price, PriceError } from "./prices";
import { type Month, standbyHours, type StandbyHours } from "./schedule";

/** One GPU node group (one AZ, one class), as infra/gpu-node-groups.ts creates it. */
export interface GroupCost {
  az: string;
  role: "active" | "standby";
  gpuClass: string;
  instanceType: string;
  /** Nodes while up: the class's `desiredPerAz`. */
  nodes: number;
  /** Upper bound the autoscaler may reach (`maxPerAz`); not priced. */
  maxNodes: number;
  gpus: number;
  /** Hours at `nodes` in the month with the standby schedule (all of them for active groups). */
  hoursUp: number;
  gpuHoursAlwaysOn: number;
  gpuHoursScheduled: number;
  usdPerHour: number;
  usdAlwaysOn: number;
  usdScheduled: number;
  usdSaved: number;
  /** Share of this group's always-on cost the schedule saves, in percent. */
  savedPct: number;
}

export interface Totals {
  nodes: number;
  gpus: number;
  gpuHoursAlwaysOn: number;
  gpuHoursScheduled: number;
  usdAlwaysOn: number;
  usdScheduled: number;
  usdSaved: number;
  savedPct: number;
}

export interface CostReport {
  stack: string;
  file: string;
  region: string;
  month: string;
  hours: number;
  standbyAz: string | null;
  schedule: (StackConfig["schedule"] & { hoursUp: number; hoursDown: number; startsUp: boolean; scaleDowns: number; scaleUps: number }) | null;
  groups: GroupCost[];
  /** The standby AZ's groups only: the part of the bill the schedule acts on. */
  standby: Totals | null;
  total: Totals;
  prices: Price[];
}

const round2 = (x: number): number => Math.round(x * 100) / 100;
const cents = (usd: number): number => Math.round(usd * 100);
const pct = (part: number, whole: number): number => (whole === 0 ? 0 : round2((100 * part) / whole));

function sum(groups: GroupCost[]): Totals {
  const add = (f: (g: GroupCost) => number) => groups.reduce((s, g) => s + f(g), 0);
  // Money is summed in whole cents so the totals are exactly the sum of the printed rows.
  const usdAlwaysOn = add((g) => cents(g.usdAlwaysOn)) / 100;
  const usdScheduled = add((g) => cents(g.usdScheduled)) / 100;
  const usdSaved = add((g) => cents(g.usdSaved)) / 100;
  return {
    nodes: add((g) => g.nodes),
    gpus: add((g) => g.gpus),
    gpuHoursAlwaysOn: round2(add((g) => g.gpuHoursAlwaysOn)),
    gpuHoursScheduled: round2(add((g) => g.gpuHoursScheduled)),
    usdAlwaysOn,
    usdScheduled,
    usdSaved,
    savedPct: pct(usdSaved, usdAlwaysOn),
  };
}

/**
 * GPU hours and On-Demand cost of every GPU node group over `month`, always on and with the
 * standby schedule. Throws `PriceError` naming the instance type, region and config key
 * when no price is known.
 */
export function estimateCost(
  cfg: StackConfig,
  opts: { stack: string; file: string; month: Month; prices: readonly Price[]; overrides: readonly Price[] },
): CostReport {
  const { month } = opts;
  const sched: StandbyHours | undefined = cfg.schedule && cfg.standbyAz !== undefined ? standbyHours(cfg.schedule, month) : undefined;
  const used = new Map<string, Price>();
  const groups: GroupCost[] = [];
  for (const az of cfg.azs) {
    cfg.gpuClasses.forEach((cls, i) => {
      const price = findPrice(opts.prices, opts.overrides, cls.instanceType, cfg.region);
      if (price === undefined) {
        throw new PriceError(
          `no On-Demand price for ${cls.instanceType} in ${cfg.region} (llm-ha:gpuClasses[${i}], class ${cls.name}); ` +
            `add it to infra/cost/prices.json or pass --price ${cls.instanceType}=USD_PER_HOUR`,
        );
      }
      used.set(`${price.instanceType}@${price.region}`, price);
      const role = az === cfg.standbyAz ? "standby" : "active";
      const hoursUp = role === "standby" && sched ? sched.minutesUp / 60 : month.hours;
      const nodes = cls.desiredPerAz;
      const gpus = nodes * cls.gpusPerNode;
      const usdAlwaysOn = round2(price.usdPerHour * nodes * month.hours);
      const usdScheduled = round2(price.usdPerHour * nodes * hoursUp);
      const usdSaved = (cents(usdAlwaysOn) - cents(usdScheduled)) / 100;
      groups.push({
        az,
        role,
        gpuClass: cls.name,
        instanceType: cls.instanceType,
        nodes,
        maxNodes: cls.maxPerAz,
        gpus,
        hoursUp: round2(hoursUp),
        gpuHoursAlwaysOn: round2(gpus * month.hours),
        gpuHoursScheduled: round2(gpus * hoursUp),
        usdPerHour: price.usdPerHour,
        usdAlwaysOn,
        usdScheduled,
        usdSaved,
        savedPct: pct(usdSaved, usdAlwaysOn),
      });
    });
  }
  const standbyGroups = groups.filter((g) => g.role === "standby");
  return {
    stack: opts.stack,
    file: opts.file,
    region: cfg.region,
    month: month.name,
    hours: month.hours,
    standbyAz: cfg.standbyAz ?? null,
    schedule:
      cfg.schedule && sched
        ? {
            ...cfg.schedule,
            hoursUp: round2(sched.minutesUp / 60),
            hoursDown: round2(sched.minutesDown / 60),
            startsUp: sched.startsUp,
            scaleDowns: sched.scaleDowns,
            scaleUps: sched.scaleUps,
          }
        : null,
    groups,
    standby: standbyGroups.length ? sum(standbyGroups) : null,
    total: sum(groups),
    prices: [...used.values()],
  };
}
