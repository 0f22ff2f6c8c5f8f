/**
 * The repair ladder's replacement through EC2 Auto Scaling (AWS SDK v3, loaded on first use;
 * credentials from the controller's role):
 *
 * - surge: the instance's group (`DescribeAutoScalingInstances`) is read
 *   (`DescribeAutoScalingGroups`); below its max it is tagged `llm-ha:repair-surge=<instance>`
 *   first (`CreateOrUpdateTags`: whichever leader comes next sees the surge was asked, and a
 *   repeat is `already`), then given one more instance (`UpdateAutoScalingGroup` DesiredCapacity
 *   + 1, MinSize and MaxSize as they are: the role's grant bounds both). At its max nothing is
 *   asked: the replacement comes after the termination;
 * - terminate: `TerminateInstanceInAutoScalingGroup`, decrementing the desired capacity when
 *   the surge was asked (the new instance took the old one's place), then the tag is deleted.
 *   An instance the group no longer knows is `already` (a repeat after a cut-off call).
 */
import type { AutoScalingClient } from "@aws-sdk/client-auto-scaling";

/** ASG tag naming the instance a surge replaces. */
export const REPAIR_SURGE_TAG = "llm-ha:repair-surge";

export interface InstanceReplacer {
  /** `surged`: one more instance was asked (now or before); false: the group is at its max. `changed`: asked by this call. */
  surge(instanceId: string): Promise<{ surged: boolean; changed: boolean; detail: string; calls: number }>;
  /** `changed` false: the group no longer knows the instance. */
  terminate(instanceId: string, decrement: boolean): Promise<{ changed: boolean; detail: string; calls: number }>;
}

export class AsgReplacer implements InstanceReplacer {
  private client: AutoScalingClient | null = null;

  constructor(
    private readonly region?: string,
    client?: AutoScalingClient,
  ) {
    this.client = client ?? null;
  }

  private async asg(): Promise<{ client: AutoScalingClient; sdk: typeof import("@aws-sdk/client-auto-scaling") }> {
    const sdk = await import("@aws-sdk/client-auto-scaling");
    this.client ??= new sdk.AutoScalingClient(this.region ? { region: this.region } : {});
    return { client: this.client, sdk };
  }

  private async groupOf(instanceId: string): Promise<string | null> {
    const { client, sdk } = await this.asg();
    const out = await client.send(new sdk.DescribeAutoScalingInstancesCommand({ InstanceIds: [instanceId] }));
    return out.AutoScalingInstances?.[0]?.AutoScalingGroupName ?? null;
  }

  async surge(instanceId: string): Promise<{ surged: boolean; changed: boolean; detail: string; calls: number }> {
    const { client, sdk } = await this.asg();
    const name = await this.groupOf(instanceId);
    if (!name) throw new Error(`${instanceId} is in no Auto Scaling group: replace it by hand`);
    const g = (await client.send(new sdk.DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [name] }))).AutoScalingGroups?.[0];
    if (!g) throw new Error(`Auto Scaling group ${name} not found`);
    const desired = g.DesiredCapacity ?? 0;
    const max = g.MaxSize ?? 0;
    if (g.Tags?.some((t) => t.Key === REPAIR_SURGE_TAG && t.Value === instanceId)) {
      return { surged: true, changed: false, detail: `${name} already surged for ${instanceId} (desired ${desired})`, calls: 2 };
    }
    if (desired >= max) return { surged: false, changed: false, detail: `${name} at its max (${max}): nothing asked; the group launches the replacement after the termination`, calls: 2 };
    const tag = { ResourceId: name, ResourceType: "auto-scaling-group", Key: REPAIR_SURGE_TAG, Value: instanceId, PropagateAtLaunch: false };
    await client.send(new sdk.CreateOrUpdateTagsCommand({ Tags: [tag] }));
    await client.send(new sdk.UpdateAutoScalingGroupCommand({ AutoScalingGroupName: name, MinSize: g.MinSize ?? 0, MaxSize: max, DesiredCapacity: desired + 1 }));
    return { surged: true, changed: true, detail: `${name} desired ${desired}→${desired + 1} to replace ${instanceId}`, calls: 4 };
  }

  async terminate(instanceId: string, decrement: boolean): Promise<{ changed: boolean; detail: string; calls: number }> {
    const { client, sdk } = await this.asg();
    const name = await this.groupOf(instanceId);
    if (!name) return { changed: false, detail: `${instanceId} is in no Auto Scaling group any more (terminated)`, calls: 1 };
    await client.send(new sdk.TerminateInstanceInAutoScalingGroupCommand({ InstanceId: instanceId, ShouldDecrementDesiredCapacity: decrement }));
    await client.send(new sdk.DeleteTagsCommand({ Tags: [{ ResourceId: name, ResourceType: "auto-scaling-group", Key: REPAIR_SURGE_TAG, Value: instanceId }] }));
    return { changed: true, detail: `${instanceId} terminated in ${name}${decrement ? " (desired back by one: the surge took its place)" : " (the group launches its replacement)"}`, calls: 3 };
  }
}
