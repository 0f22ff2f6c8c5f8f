// Offline evaluation of the pack, following @pulumi/policy's analyzer (server.js in 1.21):
// the same enforcement-level resolution, the same per-type fast path, a `notApplicable()`
// that throws and is caught, resource policies per resource and stack policies over all.
// What the CLI does before it calls the analyzer — fill each policy's config from the
// `configSchema` defaults and check it against the schema — is done here too, so a run
// with no config sees exactly what `pulumi preview --policy-pack policies` sees.
import type {
  EnforcementLevel,
  Policies,
  PolicyConfigSchema,
  PolicyResource,
  PolicyResourceOptions,
  ResourceValidationArgs,
  ResourceValidationPolicy,
  StackValidationArgs,
  StackValidationPolicy,
} from "@pulumi/policy";
import type { PolicyConfigJSONSchema } from "@pulumi/policy/schema";

/** A resource as the infra harness captures it under Pulumi's mocks. */
export interface CapturedResource {
  type: string;
  name: string;
  urn: string;
  props: Record<string, unknown>;
  /**
   * What the engine's register request carried (infra/capture.ts reads it off the mock
   * monitor): the direct dependencies (explicit `dependsOn` and every input that is another
   * resource's Output), per property, and the custom timeouts. Absent: none recorded.
   */
  opts?: {
    /** `ignoreChanges` as the program gave it (the engine passes it to policies in `opts`). */
    ignoreChanges?: string[];
    dependsOn?: string[];
    propertyDependencies?: Record<string, string[]>;
    customTimeouts?: { create?: string; update?: string; delete?: string };
  };
}

export interface Violation {
  policy: string;
  /** `mandatory` or `advisory` (`remediate` is reported as mandatory, as the engine does). */
  enforcementLevel: EnforcementLevel;
  urn?: string;
  /** The text the policy reported (the engine prefixes it with the policy description). */
  message: string;
}

/** One policy's settings: a bare level, or properties plus an optional level (the `--policy-pack-config` shape). */
export type PolicySettings = EnforcementLevel | ({ enforcementLevel?: EnforcementLevel } & Record<string, unknown>);
export type PackConfig = Record<string, PolicySettings>;

export interface RunOptions {
  /** Per-policy overrides, as in a `--policy-pack-config` file. */
  config?: PackConfig;
  /** The pack's level, used when neither config nor policy sets one. Default `advisory`, as in `PolicyPack`. */
  packEnforcementLevel?: EnforcementLevel;
}

/** Thrown for config that the Pulumi CLI would refuse before running the pack. */
export class PolicyConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PolicyConfigError";
  }
}

/** What `args.notApplicable()` throws; the runner catches it like the analyzer catches its own. */
export class PolicyNotApplicableError extends Error {
  constructor(readonly reason?: string) {
    super(reason ?? "Policy does not apply");
    this.name = "PolicyNotApplicableError";
  }
}

function throwNotApplicable(reason?: string): never {
  throw new PolicyNotApplicableError(reason);
}

type ResourceClass = { isInstance?: (o: unknown) => boolean };

/** The type token @pulumi/policy attaches to typed validators and SDK classes carry. */
function pulumiTypeOf(o: unknown): string | undefined {
  const t = (o as { __pulumiType?: unknown } | undefined)?.__pulumiType;
  return typeof t === "string" && t.length > 0 ? t : undefined;
}

function isTypeOf(type: string, cls: unknown): boolean {
  const t = pulumiTypeOf(cls);
  if (t) return type === t;
  const isInstance = (cls as ResourceClass).isInstance;
  return typeof isInstance === "function" && isInstance({ __pulumiType: type }) === true;
}

const EMPTY_OPTS: PolicyResourceOptions = {
  protect: false,
  ignoreChanges: [],
  aliases: [],
  customTimeouts: { createSeconds: 0, updateSeconds: 0, deleteSeconds: 0 },
  additionalSecretOutputs: [],
};

function isStackPolicy(p: Policies[number]): p is StackValidationPolicy {
  return typeof (p as StackValidationPolicy).validateStack === "function";
}

function levelOf(settings: PolicySettings | undefined): EnforcementLevel | undefined {
  if (typeof settings === "string") return settings;
  return settings?.enforcementLevel;
}

/** The level a policy runs at under `options` (`remediate` reported as mandatory); `disabled` is not run. */
export function policyLevel(p: Policies[number], options: RunOptions = {}): EnforcementLevel {
  const config = options.config ?? {};
  const level = levelOf(config[p.name]) ?? levelOf(config.all) ?? p.enforcementLevel ?? options.packEnforcementLevel ?? "advisory";
  return level === "remediate" ? "mandatory" : level;
}

/** Schema defaults overlaid with the overrides, checked against the schema. */
export function resolvePolicyConfig(
  policyName: string,
  schema: PolicyConfigSchema | undefined,
  settings: PolicySettings | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, s] of Object.entries(schema?.properties ?? {})) {
    if (s.default !== undefined) out[k] = structuredClone(s.default);
  }
  if (typeof settings === "object") {
    for (const [k, v] of Object.entries(settings)) if (k !== "enforcementLevel") out[k] = v;
  }
  const problems: string[] = [];
  for (const key of schema?.required ?? []) {
    if (out[key] === undefined) problems.push(`${key} is required`);
  }
  for (const [k, v] of Object.entries(out)) {
    const s = schema?.properties[k];
    if (s) checkSchema(`${k}`, v, s, problems);
  }
  if (problems.length > 0) {
    throw new PolicyConfigError(`invalid config for policy ${policyName}: ${problems.join("; ")}`);
  }
  return out;
}

/** The JSON-schema subset the pack's schemas use: type, enum, minimum/maximum, items, properties, required. */
function checkSchema(path: string, v: unknown, s: PolicyConfigJSONSchema, problems: string[]): void {
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
  const actual =
    v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v;
  const ok =
    types.length === 0 || types.some((t) => t === actual || (t === "number" && actual === "integer"));
  if (!ok) {
    problems.push(`${path} must be ${types.join(" or ")}`);
    return;
  }
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) {
    problems.push(`${path} must be one of ${s.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  }
  if (typeof v === "number") {
    if (s.minimum !== undefined && v < s.minimum) problems.push(`${path} must be >= ${s.minimum}`);
    if (s.maximum !== undefined && v > s.maximum) problems.push(`${path} must be <= ${s.maximum}`);
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) problems.push(`${path} needs at least ${s.minItems} items`);
    const item = s.items;
    if (item && typeof item === "object" && !Array.isArray(item)) {
      v.forEach((x, i) => checkSchema(`${path}[${i}]`, x, item, problems));
    }
  }
  if (typeof v === "object" && v !== null && !Array.isArray(v)) {
    const o = v as Record<string, unknown>;
    for (const key of s.required ?? []) if (o[key] === undefined) problems.push(`${path}.${key} is required`);
    for (const [k, sub] of Object.entries(s.properties ?? {})) {
      if (o[k] !== undefined && typeof sub === "object") checkSchema(`${path}.${k}`, o[k], sub, problems);
    }
  }
}

/** `"10m"`, `"90s"`, `"1h30m"` (Go durations, as Pulumi takes them) in seconds; 0 for none. */
export function durationSeconds(d: string | undefined): number {
  if (!d) return 0;
  let total = 0;
  for (const m of d.matchAll(/(\d+(?:\.\d+)?)(h|m|s)/g)) total += Number(m[1]) * { h: 3600, m: 60, s: 1 }[m[2] as "h" | "m" | "s"];
  return total;
}

/**
 * The resources as the analyzer hands them to stack policies: with their direct dependencies
 * and property dependencies resolved to the other resources, and their custom timeouts, as
 * `pulumi preview --policy-pack` does (the capture records what the register requests carried).
 */
function toPolicyResources(rs: readonly CapturedResource[]): PolicyResource[] {
  const byUrn = new Map<string, PolicyResource>();
  const out = rs.map((r) => {
    const props = r.props as Record<string, unknown>;
    const t = r.opts?.customTimeouts;
    const pr: PolicyResource = {
      type: r.type,
      props,
      urn: r.urn,
      name: r.name,
      opts: {
        ...EMPTY_OPTS,
        ignoreChanges: [...(r.opts?.ignoreChanges ?? [])],
        ...(t ? { customTimeouts: { createSeconds: durationSeconds(t.create), updateSeconds: durationSeconds(t.update), deleteSeconds: durationSeconds(t.delete) } } : {}),
      },
      dependencies: [],
      propertyDependencies: {},
      isType: (cls: unknown) => isTypeOf(r.type, cls),
      asType: ((cls: unknown) => (isTypeOf(r.type, cls) ? props : undefined)) as PolicyResource["asType"],
    };
    byUrn.set(r.urn, pr);
    return pr;
  });
  const resolve = (urns: readonly string[] | undefined) => (urns ?? []).map((u) => byUrn.get(u)).filter((x): x is PolicyResource => x !== undefined);
  rs.forEach((r, i) => {
    out[i].dependencies = resolve(r.opts?.dependsOn);
    out[i].propertyDependencies = Object.fromEntries(Object.entries(r.opts?.propertyDependencies ?? {}).map(([k, urns]) => [k, resolve(urns)]));
  });
  return out;
}

/** Evaluates every policy over `resources`; returns the violations in policy order. */
export async function runPolicies(
  policies: Policies,
  resources: readonly CapturedResource[],
  options: RunOptions = {},
): Promise<Violation[]> {
  // Like the CLI, config for a policy the pack does not have is ignored.
  const config = options.config ?? {};
  const violations: Violation[] = [];
  const stackTags: ReadonlyMap<string, string> = new Map();
  const policyResources = toPolicyResources(resources);

  for (const p of policies) {
    const settings = config[p.name];
    const level = policyLevel(p, options);
    if (level === "disabled") continue;
    const policyConfig = resolvePolicyConfig(p.name, p.configSchema, settings);
    const getConfig = <T extends object>(): T => structuredClone(policyConfig) as T;
    const report = (urn: string | undefined) => (message: string, reportedUrn?: string) => {
      violations.push({ policy: p.name, enforcementLevel: level, urn: reportedUrn ?? urn, message });
    };

    if (isStackPolicy(p)) {
      const t = pulumiTypeOf(p.validateStack);
      if (t && !resources.some((r) => r.type === t)) continue;
      const args: StackValidationArgs = {
        resources: policyResources,
        getConfig,
        stackTags,
        notApplicable: throwNotApplicable,
      };
      await callCatchingNotApplicable(() => p.validateStack(args, report(undefined)));
      continue;
    }

    const validate = (p as ResourceValidationPolicy).validateResource;
    if (!validate) continue;
    const validations = Array.isArray(validate) ? validate : [validate];
    for (const [i, r] of resources.entries()) {
      if (!Array.isArray(validate)) {
        const t = pulumiTypeOf(validate);
        if (t && t !== r.type) continue;
      }
      for (const v of validations) {
        const props = r.props as Record<string, unknown>;
        const args: ResourceValidationArgs = {
          type: r.type,
          props,
          urn: r.urn,
          name: r.name,
          opts: policyResources[i].opts,
          stackTags,
          isType: (cls: unknown) => isTypeOf(r.type, cls),
          asType: ((cls: unknown) => (isTypeOf(r.type, cls) ? props : undefined)) as ResourceValidationArgs["asType"],
          getConfig,
          notApplicable: throwNotApplicable,
        };
        await callCatchingNotApplicable(() => v(args, report(r.urn)));
      }
    }
  }
  return violations;
}

async function callCatchingNotApplicable(fn: () => Promise<void> | void): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (!(e instanceof PolicyNotApplicableError)) throw e;
  }
}

/** The violations that fail `pulumi preview`. */
export function mandatory(violations: readonly Violation[]): Violation[] {
  return violations.filter((v) => v.enforcementLevel === "mandatory");
}
