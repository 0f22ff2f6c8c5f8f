import * as pulumi from "@pulumi/pulumi";

/**
 * Collects every validation problem of a set of inputs so that one run reports all of
 * them at once (as pulumi-eks does), instead of one `pulumi up` per mistake.
 */
export class Problems {
  private readonly list: pulumi.InputPropertyErrorDetails[] = [];

  /** Records that `propertyPath` is wrong, and why. */
  add(propertyPath: string, reason: string): void {
    this.list.push({ propertyPath, reason });
  }

  /** Throws one `InputPropertiesError` naming every recorded property, if there is any. */
  throwIfAny(what: string): void {
    if (this.list.length === 0) return;
    const detail = this.list.map((p) => `${p.propertyPath}: ${p.reason}`).join("; ");
    throw new pulumi.InputPropertiesError({ message: `invalid ${what}: ${detail}`, errors: [...this.list] });
  }
}
