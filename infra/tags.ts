/**
 * The tags every taggable AWS resource of the stack carries, set in one place. During an AZ
 * incident the on-call engineer finds and attributes resources by them (policies/tags.ts,
 * `required-tags`, checks them).
 *
 * Set on each resource's own `tags` rather than as an explicit `aws.Provider`'s
 * `defaultTags`: resources stay on the default provider (no provider swap for resources
 * already deployed, and the user's `aws:*` stack settings such as `aws:profile` keep
 * applying, which an explicit provider would ignore), and the tags are in the inputs the
 * mock capture (infra/capture.ts) and the policy pack see.
 */
import * as pulumi from "@pulumi/pulumi";

export type Tags = Record<string, pulumi.Input<string>>;

/** `Project` (the Pulumi project) and `Environment` (the stack: dev, staging, prod). */
export function commonTags(): Record<string, string> {
  return { Project: pulumi.getProject(), Environment: pulumi.getStack() };
}

/** A resource's own tags plus the common ones; the common ones win, so every resource agrees on them. */
export function tagged(own: Tags = {}): Tags {
  return { ...own, ...commonTags() };
}
