import { validateResourceOfType, type ResourceValidationPolicy, type StackValidationPolicy } from "@pulumi/policy";
import * as aws from "@pulumi/aws";
import { L1_AUTH_ENFORCEMENT } from "../../policies/edge";
import { describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { PolicyConfigError, resolvePolicyConfig, runPolicies } from "../../policies/runner";
import { happyStack } from "./fixtures";

const probe: ResourceValidationPolicy = {
  name: "probe",
  description: "test policy",
  enforcementLevel: "mandatory",
  configSchema: { properties: { limit: { type: "integer", minimum: 1, default: 5 }, label: { type: "string", default: "x" } } },
  validateResource: validateResourceOfType(aws.route53.HealthCheck, (_hc, args, report) => {
    const cfg = args.getConfig<{ limit: number; label: string }>();
    report(`${args.name} limit=${cfg.limit} label=${cfg.label}`);
  }),
};

describe("runPolicies", () => {
  it("finds nothing wrong with the valid fixture stack, advisory policies included", async () => {
    expect(await runPolicies(policies, happyStack())).toEqual([]);
  });

  it("gives policies their schema defaults, overridden key by key", async () => {
    const rs = happyStack();
    expect((await runPolicies([probe], rs)).map((v) => v.message)).toEqual([
      "hc-us-east-1a limit=5 label=x",
      "hc-us-east-1b limit=5 label=x",
      "hc-us-east-1c limit=5 label=x",
    ]);
    expect((await runPolicies([probe], rs, { config: { probe: { limit: 9 } } })).map((v) => v.message)[0]).toBe(
      "hc-us-east-1a limit=9 label=x",
    );
  });

  it("attributes resource violations to the resource's URN", async () => {
    const [v] = await runPolicies([probe], happyStack());
    expect(v).toEqual({
      policy: "probe",
      enforcementLevel: "mandatory",
      urn: "urn:pulumi:test::llm-ha::aws:route53/healthCheck:HealthCheck::hc-us-east-1a",
      message: "hc-us-east-1a limit=5 label=x",
    });
  });

  it("resolves enforcement levels as the engine does: policy config, then all, then the policy", async () => {
    const rs = happyStack();
    const levels = async (config: Parameters<typeof runPolicies>[2]) => [...new Set((await runPolicies([probe], rs, config)).map((v) => v.enforcementLevel))];
    expect(await levels({ config: { probe: "advisory" } })).toEqual(["advisory"]);
    expect(await levels({ config: { all: "advisory" } })).toEqual(["advisory"]);
    expect(await levels({ config: { all: "advisory", probe: { enforcementLevel: "mandatory" } } })).toEqual(["mandatory"]);
    expect(await levels({ config: { probe: "remediate" } })).toEqual(["mandatory"]);
    expect(await runPolicies([probe], rs, { config: { probe: "disabled" } })).toEqual([]);
  });

  it("catches notApplicable() and lets other errors through", async () => {
    const picky: ResourceValidationPolicy = {
      name: "picky",
      description: "throws",
      validateResource: (args) => {
        if (args.type !== "aws:msk/cluster:Cluster") args.notApplicable("only MSK");
        throw new TypeError("policy bug");
      },
    };
    await expect(runPolicies([picky], happyStack())).rejects.toThrow("policy bug");
    const notMsk = happyStack().filter((r) => r.type !== "aws:msk/cluster:Cluster");
    expect(await runPolicies([picky], notMsk)).toEqual([]);
  });

  it("hands stack policies every resource once", async () => {
    const seen: number[] = [];
    const counter: StackValidationPolicy = {
      name: "counter",
      description: "counts",
      enforcementLevel: "advisory",
      validateStack: (args, report) => {
        seen.push(args.resources.length);
        report(`${args.resources.length} resources`);
      },
    };
    const v = await runPolicies([counter], happyStack());
    expect(seen).toEqual([happyStack().length]);
    expect(v).toEqual([{ policy: "counter", enforcementLevel: "advisory", urn: undefined, message: `${happyStack().length} resources` }]);
  });

  it("refuses config the CLI would refuse", async () => {
    await expect(runPolicies([probe], happyStack(), { config: { probe: { limit: 0 } } })).rejects.toThrow(
      new PolicyConfigError("invalid config for policy probe: limit must be >= 1"),
    );
    expect(() => resolvePolicyConfig("probe", probe.configSchema, { limit: "many" })).toThrow("limit must be integer");
  });

  it("ignores config for policies the pack does not have, as the CLI does", async () => {
    expect(await runPolicies([probe], [], { config: { "no-such-policy": "mandatory" } })).toEqual([]);
  });
});

describe("the pack", () => {
  it("has unique kebab-case names, a tier in every description and defaults for every config key", () => {
    const names = policies.map((p) => p.name);
    expect(new Set(names).size).toBe(names.length);
    for (const p of policies) {
      expect(p.name).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
      expect(p.description).toMatch(/\bL[1-4]\b/);
      expect(p.enforcementLevel).toMatch(/^(mandatory|advisory)$/);
      for (const [key, schema] of Object.entries(p.configSchema?.properties ?? {})) {
        expect(schema.default, `${p.name}.${key}`).toBeDefined();
      }
    }
    expect(policies.filter((p) => p.enforcementLevel === "advisory").map((p) => p.name)).toEqual([
      "required-tags",
      "eks-control-plane-logging",
      // A warning ahead of the end of standard support (the refusal after it is eks-version-supported's).
      "eks-version-support-ending",
      // Until the HAProxy generator renders client authentication (policies/edge.ts, L1_AUTH_ENFORCEMENT).
      ...(L1_AUTH_ENFORCEMENT === "advisory" ? ["l1-auth-required"] : []),
    ]);
  });
});
