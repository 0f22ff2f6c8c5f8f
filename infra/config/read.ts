import * as pulumi from "@pulumi/pulumi";
import { cronProblem } from "../../contracts/cron";
import { Problems } from "../problems";

/** A stack-file object as Pulumi hands it over: untyped JSON, checked key by key. */
export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
export const isPosInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;

/** An EC2 instance type name (`p5.48xlarge`). */
export const INSTANCE_TYPE = /^[a-z][a-z0-9-]*\.[a-z0-9]+$/;

/** True for a 5-field cron expression as EC2 Auto Scaling accepts it (see `cron.ts`). */
export function isCron(expr: string): boolean {
  return cronProblem(expr) === undefined;
}

export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * The project's settings with the problems they collect: every concern's reader
 * (`network.ts`, `gpu.ts`, …) takes one, so a bad key is named the same way everywhere
 * and all of them are reported together.
 */
export interface Settings {
  cfg: pulumi.Config;
  p: Problems;
  /** `llm-ha:<k>`. */
  key(k: string): string;
  /** The object setting `k`, or `{}` (a non-object is reported). */
  obj(k: string): Obj;
  /** A non-empty string field of `o`, or `dflt`; reported under `path` when missing or empty. */
  str(o: Obj, k: string, path: string, dflt?: string): string;
  /** An integer field of `o` ≥ `min`, or `dflt`. */
  int(o: Obj, k: string, path: string, dflt: number, min?: number): number;
}

export function settingsOf(cfg: pulumi.Config, p: Problems): Settings {
  const key = (k: string) => `${cfg.name}:${k}`;
  return {
    cfg,
    p,
    key,
    obj(k) {
      const v = cfg.getObject<unknown>(k);
      if (v === undefined) return {};
      if (!isObj(v)) {
        p.add(key(k), "must be an object");
        return {};
      }
      return v;
    },
    str(o, k, path, dflt) {
      const v = o[k] ?? dflt;
      if (typeof v !== "string" || v === "") {
        p.add(path, dflt === undefined && v === undefined ? "is required" : "must be a non-empty string");
        return "";
      }
      return v;
    },
    int(o, k, path, dflt, min = 1) {
      const v = o[k] ?? dflt;
      if (!Number.isInteger(v) || (v as number) < min) {
        p.add(path, `must be an integer ≥ ${min}`);
        return dflt;
      }
      return v as number;
    },
  };
}

/**
 * A structured setting's object (`llm-ha:<name>`), or `{}`: a bare value (`pulumi config set llm-ha:<name> x`,
 * without `--path`) is reported naming the shape and the command meant (`hint`).
 */
export function objectSetting(s: Settings, name: string, shape: string, hint: string): Obj {
  const text = s.cfg.get(name);
  if (text === undefined) return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    v = text;
  }
  if (isObj(v)) return v;
  s.p.add(s.key(name), `must be an object ${shape}, got ${JSON.stringify(v)}: ${hint}`);
  return {};
}
