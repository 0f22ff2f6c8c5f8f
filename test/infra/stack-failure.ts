/** The configuration error a stack refuses to build with, under Pulumi's mocks (shared by the infra suites). */
import * as pulumi from "@pulumi/pulumi";
import { expect } from "vitest";
import { captureStack, type Env } from "../../infra/capture";

export async function stackFailure(overrides: Record<string, string>, env: Env = "dev"): Promise<pulumi.InputPropertiesError> {
  const err: unknown = await captureStack(env, overrides).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(pulumi.InputPropertiesError.isInstance(err), String(err)).toBe(true);
  return err as pulumi.InputPropertiesError;
}

/** `stackFailure`'s errors as `path: reason` lines. */
export async function stackFailureLines(overrides: Record<string, string>, env: Env = "dev"): Promise<string[]> {
  return (await stackFailure(overrides, env)).errors.map((x) => `${x.propertyPath}: ${x.reason}`);
}
