import * as path from "node:path";
import * as aws from "@pulumi/aws";
import * as dockerBuild from "@pulumi/docker-build";
import * as pulumi from "@pulumi/pulumi";
import { tagged } from "./tags";

export interface AgentImageArgs {
  /** ECR repository name. Required. */
  repositoryName: string;
  /** The image by digest (`<repo>@sha256:…`), when the user pushes it. */
  image?: string;
  /** Build agent/Dockerfile with Docker (buildx) and push it here instead. Default false. */
  build?: boolean;
}

/** The repository root: the build context of agent/Dockerfile. */
const ROOT = path.resolve(__dirname, "..");

/**
 * The agent image's home: an ECR repository of the stack (scan on push, KMS), and
 * the reference the DaemonSets run — always by digest. Either the user pushed it and gave the
 * digest (`llm-ha:agentImage`), or the program builds agent/Dockerfile and pushes it
 * (`llm-ha:agentImageBuild: true`, `@pulumi/docker-build`; needs a Docker daemon where
 * `pulumi up` runs).
 */
export class AgentImage extends pulumi.ComponentResource {
  readonly repository: aws.ecr.Repository;
  /** `<repo>@sha256:…` */
  readonly ref: pulumi.Output<string>;

  constructor(name: string, args: AgentImageArgs, opts?: pulumi.ComponentResourceOptions) {
    super("llm-ha:infra:AgentImage", name, {}, opts);
    this.repository = new aws.ecr.Repository(
      `${name}-repo`,
      {
        name: args.repositoryName,
        // The DaemonSets run the image by digest; the tag (the stack's name) only marks the latest build.
        imageTagMutability: "MUTABLE",
        imageScanningConfiguration: { scanOnPush: true },
        encryptionConfigurations: [{ encryptionType: "KMS" }],
        forceDelete: false,
        tags: tagged(),
      },
      { parent: this },
    );
    if (args.build) {
      const auth = aws.ecr.getAuthorizationTokenOutput({ registryId: this.repository.registryId }, { parent: this });
      const image = new dockerBuild.Image(
        `${name}-build`,
        {
          context: { location: ROOT },
          dockerfile: { location: path.join(ROOT, "agent", "Dockerfile") },
          platforms: ["linux/amd64"],
          push: true,
          tags: [pulumi.interpolate`${this.repository.repositoryUrl}:${pulumi.getStack()}`],
          registries: [{ address: this.repository.repositoryUrl, username: auth.userName, password: pulumi.secret(auth.password) }],
        },
        { parent: this },
      );
      this.ref = pulumi.interpolate`${this.repository.repositoryUrl}@${image.digest}`;
    } else {
      this.ref = pulumi.output(args.image ?? "");
    }
    this.registerOutputs({ repositoryUrl: this.repository.repositoryUrl, ref: this.ref });
  }
}
