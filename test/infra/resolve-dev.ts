/**
 * The dev stack file with the offline stand-ins, plus a few settings, resolved as the program
 * resolves it: `resolveWith` gives the config, `problems` the refusals as `key: reason` lines
 * (none when it resolves). For tests of one setting's validation.
 */
import * as pulumi from "@pulumi/pulumi";
import { expect } from "vitest";
import { stackConfig } from "../../infra/capture";
import { resolveConfig } from "../../infra/config";
import { withStandIns } from "../../infra/user-settings";

export function resolveWith(extra: Record<string, string>) {
  pulumi.runtime.setAllConfig({ ...withStandIns(stackConfig("dev"), "dev").values, ...extra }, ["llm-ha:redisAuthToken"]);
  return resolveConfig({ project: new pulumi.Config("llm-ha"), aws: new pulumi.Config("aws"), stack: "dev", warn: () => undefined });
}

export function problems(extra: Record<string, string>): string[] {
  try {
    resolveWith(extra);
    return [];
  } catch (e) {
    expect(pulumi.InputPropertiesError.isInstance(e), String(e)).toBe(true);
    return (e as pulumi.InputPropertiesError).errors.map((x) => `${x.propertyPath}: ${x.reason}`);
  }
}
