import { cronProblem } from "../../contracts/cron";
import { GPU_CLASSES, type GpuClassConfig, type GpuClassName } from "./gpu";
import { INSTANCE_TYPE, isObj, isTimeZone, type Obj, type Settings } from "./read";
import type { StackConfig } from "./stack-config";

/** `llm-ha:practiceWake`: the leader wakes the sleeping standby on this cron and releases it (`LLMHA_PRACTICE_WAKE*`). */
export interface PracticeWakeConfig {
  /** 5-field cron. Default `0 4 * * 0` (Sunday 04:00: every stack file's standby sleeps then). */
  cron: string;
  /** IANA time zone. Default the standby schedule's. */
  timeZone: string;
  /** A practice with no standby node serving this long has failed and is released. Default 20. */
  budgetMinutes: number;
}

export const DEFAULT_PRACTICE_CRON = "0 4 * * 0";
export const DEFAULT_PRACTICE_BUDGET_MINUTES = 20;

/** Nodes of one standby group sized at `ratio` of an active AZ (`llm-ha:standbyCapacityRatio`): rounded up, max at least 1. */
export function standbySize(c: Pick<GpuClassConfig, "desiredPerAz" | "maxPerAz">, ratio: number): { desired: number; max: number } {
  const desired = Math.max(0, Math.ceil(c.desiredPerAz * ratio - 1e-9));
  return { desired, max: Math.max(1, desired, Math.ceil(c.maxPerAz * ratio - 1e-9)) };
}

export interface ScheduleConfig {
  /** IANA time zone of the cron expressions, e.g. `Europe/Berlin`. */
  timeZone: string;
  /** 5-field cron: when the standby AZ goes to zero (evenings). */
  scaleDown: string;
  /** 5-field cron: when the standby AZ comes back (mornings). */
  scaleUp: string;
  /** Extra scale-down cron (weekends); optional. */
  weekendDown?: string;
}

/** `llm-ha:schedule`: when the standby AZ sleeps and wakes; only with a standby AZ. */
export function scheduleOf(s: Settings, standbyAz: string | undefined): ScheduleConfig | undefined {
  const { p, key, str } = s;
  let schedule: ScheduleConfig | undefined;
  const sched = s.cfg.getObject<unknown>("schedule");
  if (sched !== undefined) {
    if (!isObj(sched)) p.add(key("schedule"), "must be an object");
    else {
      const timeZone = str(sched, "timeZone", key("schedule.timeZone"));
      if (timeZone && !isTimeZone(timeZone)) p.add(key("schedule.timeZone"), `${timeZone} is not an IANA time zone`);
      const cron = (k: string, required: boolean): string | undefined => {
        const v = sched[k];
        if (v === undefined && !required) return undefined;
        const why = typeof v === "string" ? cronProblem(v) : "not a string";
        if (typeof v !== "string" || why !== undefined) {
          p.add(key(`schedule.${k}`), `${JSON.stringify(v)} is not a 5-field cron expression: ${why}`);
          return undefined;
        }
        return v;
      };
      schedule = { timeZone, scaleDown: cron("scaleDown", true) ?? "", scaleUp: cron("scaleUp", true) ?? "", weekendDown: cron("weekendDown", false) };
    }
    if (standbyAz === undefined) p.add(key("schedule"), "needs llm-ha:standbyAz: the schedule only ever acts on the standby AZ");
  }
  return schedule;
}

/**
 * `llm-ha:standbyCapacityRatio`, `llm-ha:standbyFallback`, `llm-ha:standbyCapacityWaiver` and
 * `llm-ha:practiceWake`: how the standby AZ is sized, what it falls back to when its first
 * instance type has no capacity, and when it is practised. Every problem names its key.
 */
export function standbyOf(
  s: Settings,
  standbyAz: string | undefined,
  classes: GpuClassConfig[],
  schedule: ScheduleConfig | undefined,
): Pick<StackConfig, "standbyCapacityRatio" | "standbyFallback" | "standbyCapacityWaiver" | "practiceWake"> {
  const { cfg, p, key } = s;
  const needsStandby = (k: string) => p.add(key(k), `needs ${key("standbyAz")}: it is about the standby AZ`);

  let standbyCapacityRatio = 1;
  const ratioText = cfg.get("standbyCapacityRatio");
  if (ratioText !== undefined) {
    const rawRatio = ratioText.trim() === "" ? NaN : Number(ratioText);
    if (!Number.isFinite(rawRatio) || rawRatio < 0.01 || rawRatio > 1) {
      p.add(key("standbyCapacityRatio"), `${JSON.stringify(ratioText)} must be a number from 0.01 to 1: the standby's size relative to an active AZ (0.5 = half)`);
    } else if (standbyAz === undefined) needsStandby("standbyCapacityRatio");
    // Rounded up per class (`standbySize`): a class with nodes keeps at least one on the standby.
    else standbyCapacityRatio = rawRatio;
  }

  const standbyFallback: Partial<Record<GpuClassName, string[]>> = {};
  const rawFallback = cfg.getObject<unknown>("standbyFallback");
  if (rawFallback !== undefined && !isObj(rawFallback)) {
    p.add(key("standbyFallback"), "must map a GPU class to the instance types of its fallback group, e.g. {h100: [p5e.48xlarge]} ([] for none)");
  } else if (rawFallback !== undefined && standbyAz === undefined) needsStandby("standbyFallback");
  else if (standbyAz !== undefined) {
    const given = (rawFallback ?? {}) as Obj;
    for (const k of Object.keys(given)) {
      if (!classes.some((c) => c.name === k)) p.add(key(`standbyFallback.${k}`), `is not a GPU class of ${key("gpuClasses")} (${classes.map((c) => c.name).join(", ")})`);
    }
    for (const c of classes) {
      const v = given[c.name];
      let types: string[];
      if (v === undefined) {
        // Default: the class's next types the group does not already launch.
        types = GPU_CLASSES[c.name].fallbackInstanceTypes.filter((t) => !c.instanceTypes.includes(t));
      } else if (!Array.isArray(v) || !v.every((t) => typeof t === "string" && INSTANCE_TYPE.test(t))) {
        p.add(key(`standbyFallback.${c.name}`), "must be a list of EC2 instance types, e.g. [p5e.48xlarge] ([] for no fallback group)");
        continue;
      } else {
        types = v as string[];
        const dup = types.filter((t) => c.instanceTypes.includes(t));
        if (dup.length) p.add(key(`standbyFallback.${c.name}`), `${dup.join(", ")} is already an instance type of the class's own groups: a fallback needs another type`);
        if (new Set(types).size !== types.length) p.add(key(`standbyFallback.${c.name}`), "lists an instance type twice");
      }
      if (types.length) standbyFallback[c.name] = types;
    }
  }

  const rawWaiver = cfg.get("standbyCapacityWaiver");
  let standbyCapacityWaiver: string | undefined;
  if (rawWaiver !== undefined) {
    if (typeof rawWaiver !== "string" || rawWaiver.trim().length < 10 || rawWaiver.length > 256) {
      p.add(key("standbyCapacityWaiver"), "must say why the standby needs no capacity fallback, 10 to 256 characters");
    } else if (!/^[A-Za-z0-9 _.:/=+\-@,;()']+$/.test(rawWaiver)) {
      p.add(key("standbyCapacityWaiver"), "must be plain text (letters, digits, spaces and _ . : / = + - @ , ; ( ) '): it becomes an AWS tag value");
    } else if (standbyAz === undefined) needsStandby("standbyCapacityWaiver");
    else standbyCapacityWaiver = rawWaiver.trim();
  }

  let practiceWake: PracticeWakeConfig | undefined;
  const rawPractice = cfg.getObject<unknown>("practiceWake");
  if (rawPractice === false) practiceWake = undefined;
  else if (rawPractice !== undefined && !isObj(rawPractice)) p.add(key("practiceWake"), "must be an object ({cron, timeZone, budgetMinutes}) or false");
  else if (rawPractice !== undefined && standbyAz === undefined) needsStandby("practiceWake");
  else if (standbyAz !== undefined) {
    const v = (rawPractice ?? {}) as Obj;
    for (const k of Object.keys(v)) if (!["cron", "timeZone", "budgetMinutes"].includes(k)) p.add(key(`practiceWake.${k}`), "unknown setting; known: cron, timeZone, budgetMinutes");
    const cron = v.cron ?? DEFAULT_PRACTICE_CRON;
    const why = typeof cron === "string" ? cronProblem(cron) : "not a string";
    if (typeof cron !== "string" || why !== undefined) p.add(key("practiceWake.cron"), `${JSON.stringify(cron)} is not a 5-field cron expression: ${why}`);
    // Default the schedule's zone (a bad one is reported once, under llm-ha:schedule.timeZone).
    const timeZone = v.timeZone ?? (schedule?.timeZone && isTimeZone(schedule.timeZone) ? schedule.timeZone : "UTC");
    if (typeof timeZone !== "string" || !isTimeZone(timeZone)) p.add(key("practiceWake.timeZone"), `${JSON.stringify(timeZone)} is not an IANA time zone`);
    const budget = v.budgetMinutes ?? DEFAULT_PRACTICE_BUDGET_MINUTES;
    // LLMHA_PRACTICE_WAKE_BUDGET_MS takes 1 minute to 24 hours.
    if (!Number.isInteger(budget) || (budget as number) < 1 || (budget as number) > 1440) p.add(key("practiceWake.budgetMinutes"), "must be an integer from 1 to 1440");
    practiceWake = { cron: String(cron), timeZone: String(timeZone), budgetMinutes: Number(budget) };
  }
  return { standbyCapacityRatio, standbyFallback, standbyCapacityWaiver, practiceWake };
}

