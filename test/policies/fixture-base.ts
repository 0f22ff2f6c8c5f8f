// The one way the policy fixtures build a captured resource, and the tags every one carries.
import type { CapturedResource } from "../../policies/runner";

export function res(type: string, name: string, props: Record<string, unknown>): CapturedResource {
  return { type, name, urn: `urn:pulumi:test::llm-ha::${type}::${name}`, props: { ...props } };
}

export const TAGS = { Project: "llm-ha", Environment: "test" };
