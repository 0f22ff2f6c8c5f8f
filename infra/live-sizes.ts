import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";

/** Pulumi's auto-name suffix: a dash and 7 random hex characters after the logical name. */
const AUTONAME_SUFFIX = /-[0-9a-f]{7}$/;

/**
 * The desired size each of `ids` (logical names of EKS managed node groups) runs at now, read
 * from EKS at program time; a group that does not exist yet is absent. DescribeNodegroup
 * reports the size the leader's wake, the standby schedule or an operator last set on the
 * group's auto scaling group, so a `pulumi up` that must send a `scalingConfig` (a changed
 * `maxSize`, say) sends that size back, not the one the group was created with (docs/infra.md
 * "Update behaviour"). Before the cluster exists (a first preview) the answer is unknown.
 */
export function liveDesiredSizes(clusterName: pulumi.Input<string>, ids: string[], parent: pulumi.Resource): pulumi.Output<Record<string, number>> {
  const logical = (physical: string): string | undefined => {
    if (ids.includes(physical)) return physical;
    const base = physical.replace(AUTONAME_SUFFIX, "");
    return base !== physical && ids.includes(base) ? base : undefined;
  };
  return pulumi.all([clusterName, aws.eks.getNodeGroupsOutput({ clusterName }, { parent })]).apply(async ([cluster, list]) => {
    const ours = (list.names ?? []).map((n) => [n, logical(n)] as const).filter((x): x is readonly [string, string] => x[1] !== undefined);
    const sizes = await Promise.all(
      ours.map(async ([nodeGroupName, id]) => {
        const g = await aws.eks.getNodeGroup({ clusterName: cluster, nodeGroupName }, { parent });
        return [id, g.scalingConfigs?.[0]?.desiredSize] as const;
      }),
    );
    return Object.fromEntries(sizes.filter((s): s is readonly [string, number] => typeof s[1] === "number"));
  });
}
