import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { CACHE_UPSTREAMS, type CachePrefix } from "./images";
import { Problems } from "./problems";

export interface ImageCacheArgs {
  /** Names the rules' repository prefix (`<cluster>/<upstream>`): stacks sharing an account and region do not collide. Required. */
  clusterName: string;
  /** Secrets Manager secret (name `ecr-pullthroughcache/…`) with the Docker Hub user and access token. Required. */
  dockerHubSecretArn: string;
  /** Region of the cache (the cluster's). Required. */
  region: string;
}

/** ECR's limit on a pull-through cache rule's repository prefix. */
const MAX_PREFIX = 30;

/**
 * ECR pull-through cache rules for the upstreams the stack's images come from (ECR Public,
 * Docker Hub): the nodes pull `<account>.dkr.ecr.<region>.amazonaws.com/<cluster>/<upstream>/…@sha256:…`,
 * ECR fetches an image once and serves it from the region afterwards. No anonymous Docker Hub
 * pulls (10 per hour per NAT address could stall a standby wake), and a cached image survives
 * an upstream outage.
 */
export class ImageCache extends pulumi.ComponentResource {
  /** `<account>.dkr.ecr.<region>.amazonaws.com/<cluster>`: what `pullRef` puts in front of a cached path. */
  readonly cacheRoot: pulumi.Output<string>;

  constructor(name: string, args: ImageCacheArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:ImageCache", name, {}, opts);
    this.cacheRoot = createImageCache(name, args, this);
    this.registerOutputs({ cacheRoot: this.cacheRoot });
  }
}

export function createImageCache(name: string, args: ImageCacheArgs, parent: pulumi.Resource): pulumi.Output<string> {
  const p = new Problems();
  const prefixes = Object.keys(CACHE_UPSTREAMS).map((k) => `${args.clusterName}/${k}`);
  for (const x of prefixes) if (x.length > MAX_PREFIX) p.add("clusterName", `${x} is over ECR's ${MAX_PREFIX} characters for a cache prefix: shorten llm-ha:clusterName`);
  p.throwIfAny("ImageCache arguments");
  const opts = { parent };
  (Object.entries(CACHE_UPSTREAMS) as [CachePrefix, string][]).forEach(
    ([prefix, upstream]) =>
      new aws.ecr.PullThroughCacheRule(
        `${name}-${prefix}`,
        {
          ecrRepositoryPrefix: `${args.clusterName}/${prefix}`,
          upstreamRegistryUrl: upstream,
          ...(prefix === "docker-hub" ? { credentialArn: args.dockerHubSecretArn } : {}),
        },
        opts,
      ),
  );
  const account = aws.getCallerIdentityOutput({}, opts).accountId;
  return pulumi.interpolate`${account}.dkr.ecr.${args.region}.amazonaws.com/${args.clusterName}`;
}

/**
 * The nodes' right to pull through the cache: the first pull of an image through a rule
 * creates its repository and imports the image. Created with the node role's other policies
 * (infra/cluster.ts), so every node group depends on it: a node must never come up unable
 * to pull the images it is there to run.
 */
export function nodePullThroughPolicy(
  name: string,
  a: { clusterName: string; region: string; nodeRoleName: pulumi.Input<string> },
  parent: pulumi.Resource,
  aliases: pulumi.Input<pulumi.Alias | string>[] = [],
): aws.iam.RolePolicy {
  const account = aws.getCallerIdentityOutput({}, { parent }).accountId;
  const repos = pulumi.interpolate`arn:aws:ecr:${a.region}:${account}:repository/${a.clusterName}/*`;
  return new aws.iam.RolePolicy(
    name,
    {
      role: a.nodeRoleName,
      policy: repos.apply((resource) =>
        JSON.stringify({
          Version: "2012-10-17",
          Statement: [{ Sid: "PullThroughCache", Effect: "Allow", Action: ["ecr:CreateRepository", "ecr:BatchImportUpstreamImage"], Resource: resource }],
        }),
      ),
    },
    { parent, aliases },
  );
}
