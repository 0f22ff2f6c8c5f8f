import { standbySize, type StackConfig } from "../config";
import { findPrice, type Price, PriceError } from "./prices";
import { type Month, practiceRuns, standbyHours, type StandbyHours } from "./schedule";
import { wakeCost, type WakeCost } from "./wake";

/** One GPU node group (one AZ, one class), as infra/gpu-node-groups.ts creates it. */
export interface GroupCost {
  az: string;
  role: "active" | "standby";
  gpuClass: string;
  instanceType: string;
  /** Nodes while up: the class's `desiredPerAz` (on the standby AZ scaled by `standbyCapacityRatio`). */
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

/**
 * Practice wakes of the standby (`llm-ha:practiceWake`): each run wakes the standby groups at
 * zero to their wake size and releases them at the first node serving, or at the budget. The
 * budget is the estimate of each run's billed time (an upper bound: a good practice ends sooner).
 */
export interface PracticeCost {
  cron: string;
  timeZone: string;
  budgetMinutes: number;
  /** Firings in the month; `runs` of them find the standby at zero, `skipped` find it up (the leader skips those). */
  firings: number;
  runs: number;
  skipped: number;
  /** One row per standby class: wake-size nodes × runs × budget. */
  rows: { az: string; gpuClass: string; instanceType: string; nodes: number; gpus: number; hours: number; gpuHours: number; usdPerHour: number; usd: number }[];
  gpuHours: number;
  usd: number;
}

/** Partial redundancy (`llm-ha:standbyCapacityRatio`): the standby's groups against a full-size standby, both on the schedule. */
export interface RedundancyCost {
  ratio: number;
  /** Standby nodes (all classes) at this ratio and at full size. */
  nodes: number;
  fullNodes: number;
  /** The standby groups' scheduled cost at full size and at this ratio. */
  usdFull: number;
  usdPartial: number;
  usdSaved: number;
  /** Share of the environment's scheduled cost with a full-size standby that the ratio saves, in percent. */
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
  /** The standby AZ's groups (and its practice wakes) only: the part of the bill the schedule acts on. */
  standby: Totals | null;
  /** Practice wakes, counted in `standby` and `total`; null without a standby AZ or with practice off. */
  practice: PracticeCost | null;
  /** The standby's size against full redundancy; null without a standby AZ. */
  redundancy: RedundancyCost | null;
  total: Totals;
  /** Bytes and time a wake moves onto each woken GPU node (infra/cost/wake.ts). */
  wake: WakeCost;
  prices: Price[];
}

const round2 = (x: number): number => Math.round(x * 100) / 100;
const cents = (usd: number): number => Math.round(usd * 100);
const pct = (part: number, whole: number): number => (whole === 0 ? 0 : round2((100 * part) / whole));

/** The groups' totals; practice wakes add to the scheduled side only (an always-on standby skips them). */
function sum(groups: GroupCost[], practice: PracticeCost | null = null): Totals {
  const add = (f: (g: GroupCost) => number) => groups.reduce((s, g) => s + f(g), 0);
  // Money is summed in whole cents so the totals are exactly the sum of the printed rows.
  const usdAlwaysOn = add((g) => cents(g.usdAlwaysOn)) / 100;
  const usdScheduled = (add((g) => cents(g.usdScheduled)) + cents(practice?.usd ?? 0)) / 100;
  const usdSaved = (cents(usdAlwaysOn) - cents(usdScheduled)) / 100;
  return {
    nodes: add((g) => g.nodes),
    gpus: add((g) => g.gpus),
    gpuHoursAlwaysOn: round2(add((g) => g.gpuHoursAlwaysOn)),
    gpuHoursScheduled: round2(add((g) => g.gpuHoursScheduled) + (practice?.gpuHours ?? 0)),
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
      const size = role === "standby" ? standbySize(cls, cfg.standbyCapacityRatio) : { desired: cls.desiredPerAz, max: cls.maxPerAz };
      const nodes = size.desired;
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
        maxNodes: size.max,
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
  const practice = cfg.schedule && cfg.practiceWake && standbyGroups.length ? practiceCost(cfg, standbyGroups, month) : null;
  let redundancy: RedundancyCost | null = null;
  if (standbyGroups.length) {
    const full = standbyGroups.map((g) => {
      const cls = cfg.gpuClasses.find((c) => c.name === g.gpuClass)!;
      return { nodes: cls.desiredPerAz, usd: round2(g.usdPerHour * cls.desiredPerAz * g.hoursUp) };
    });
    const usdFull = full.reduce((n, f) => n + cents(f.usd), 0) / 100;
    const usdPartial = standbyGroups.reduce((n, g) => n + cents(g.usdScheduled), 0) / 100;
    const usdSaved = (cents(usdFull) - cents(usdPartial)) / 100;
    const envAtFull = sum(groups, practice).usdScheduled + usdSaved;
    redundancy = {
      ratio: cfg.standbyCapacityRatio,
      nodes: standbyGroups.reduce((n, g) => n + g.nodes, 0),
      fullNodes: full.reduce((n, f) => n + f.nodes, 0),
      usdFull,
      usdPartial,
      usdSaved,
      savedPct: pct(usdSaved, envAtFull),
    };
  }
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
    standby: standbyGroups.length ? sum(standbyGroups, practice) : null,
    practice,
    redundancy,
    total: sum(groups, practice),
    wake: wakeCost(cfg, standbyGroups.reduce((n, g) => n + Math.max(1, g.nodes), 0)),
    prices: [...used.values()],
  };
}

/** Practice runs of the month × each standby class's wake size (at least one node) × the budget. */
function practiceCost(cfg: StackConfig, standbyGroups: GroupCost[], month: Month): PracticeCost {
  const p = cfg.practiceWake!;
  const runs = practiceRuns(cfg.schedule!, p, month);
  const hours = (runs.runs * p.budgetMinutes) / 60;
  const rows = standbyGroups.map((g) => {
    const nodes = Math.max(1, g.nodes);
    const gpus = nodes * cfg.gpuClasses.find((c) => c.name === g.gpuClass)!.gpusPerNode;
    return { az: g.az, gpuClass: g.gpuClass, instanceType: g.instanceType, nodes, gpus, hours: round2(hours), gpuHours: round2(gpus * hours), usdPerHour: g.usdPerHour, usd: round2(g.usdPerHour * nodes * hours) };
  });
  return {
    cron: p.cron,
    timeZone: p.timeZone,
    budgetMinutes: p.budgetMinutes,
    ...runs,
    rows,
    gpuHours: round2(rows.reduce((n, r) => n + r.gpuHours, 0)),
    usd: rows.reduce((n, r) => n + cents(r.usd), 0) / 100,
  };
}
