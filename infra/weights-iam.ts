import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { irsaTrustPolicy } from "./agent-iam";
import { tagged } from "./tags";

/** `s3://bucket/prefix` → bucket and prefix (no leading or trailing slash). */
export function parseS3Uri(uri: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(uri);
  return { bucket: m?.[1] ?? "", prefix: (m?.[2] ?? "").replace(/\/+$/, "") };
}

/** Read-only access to one S3 prefix: list it, get its objects. */
export function weightsReadPolicy(uri: string): string {
  const { bucket, prefix } = parseS3Uri(uri);
  const objects = prefix ? `arn:aws:s3:::${bucket}/${prefix}/*` : `arn:aws:s3:::${bucket}/*`;
  return JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      { Sid: "ListWeights", Effect: "Allow", Action: ["s3:ListBucket"], Resource: `arn:aws:s3:::${bucket}`, ...(prefix ? { Condition: { StringLike: { "s3:prefix": [`${prefix}/*`, prefix] } } } : {}) },
      { Sid: "GetWeights", Effect: "Allow", Action: ["s3:GetObject"], Resource: objects },
    ],
  });
}

/** The IRSA role of the inference pods: reads the model weights' S3 prefix, nothing else. */
export function createWeightsReaderRole(
  name: string,
  args: { uri: string; oidcProviderArn: pulumi.Input<string>; oidcProviderUrl: pulumi.Input<string>; namespace: string; serviceAccount: string },
  opts?: pulumi.CustomResourceOptions,
): aws.iam.Role {
  const role = new aws.iam.Role(
    `${name}-role`,
    {
      description: "llm-ha inference pods (IRSA): read the model weights from S3",
      assumeRolePolicy: pulumi
        .all([args.oidcProviderArn, args.oidcProviderUrl])
        .apply(([arn, url]) => irsaTrustPolicy(arn, url, args.namespace, args.serviceAccount)),
      tags: tagged(),
    },
    opts,
  );
  new aws.iam.RolePolicy(`${name}-read`, { role: role.name, policy: weightsReadPolicy(args.uri) }, opts);
  return role;
}
