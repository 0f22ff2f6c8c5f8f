/**
 * The settings only the user can give: the stack files leave them out on purpose (a
 * placeholder there would pass validation and fail in AWS), `resolveConfig` refuses a stack
 * without them naming the key, and `llm-ha preflight` lists them with the command that sets
 * each. The offline tools (the mocks of infra/capture.ts, `llm-ha cost`) fill what is missing
 * with obvious stand-ins, which no real deployment ever sees.
 */
import { WORKLOAD_ROLE_NAMES } from "../contracts/redis-roles";
import { GATED_MODEL_ORGS, revisionCommand, S3_WEIGHTS_STACKS } from "./config";
import { ROLE_PASSWORDS_HOW } from "./config/data";
import { digestCommand, IMAGES } from "./images";

export interface UserSetting {
  /** Full key; a dot walks into an object setting (`llm-ha:dns.zoneId`). */
  key: string;
  /** Set with `pulumi config set --secret`. */
  secret: boolean;
  /** Whether this stack needs it (given the rest of its settings and the stack's name). */
  needed: (values: Record<string, string>, stack: string) => boolean;
  /** How to set it. */
  how: string;
  /** A value the offline tools use when it is missing. */
  standIn: (stack: string) => unknown;
}

const json = (values: Record<string, string>, key: string): Record<string, unknown> => {
  try {
    const v = JSON.parse(values[key] ?? "{}") as unknown;
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};

const weightsS3 = (values: Record<string, string>) => json(values, "llm-ha:inference").weightsS3Uri !== undefined;

const gatedModel = (values: Record<string, string>) => GATED_MODEL_ORGS.includes(String(json(values, "llm-ha:inference").model ?? "").split("/")[0]);

export const USER_SETTINGS: readonly UserSetting[] = Object.freeze([
  {
    // Per-role Redis users, the default: a stack that still has only the old AUTH token runs on
    // it (a migration path: preflight warns in dev and refuses staging and prod, as the policy
    // redis-roles-required does).
    key: "llm-ha:redisRolePasswords",
    secret: true,
    needed: (values: Record<string, string>) => !hasSetting(values, "llm-ha:redisAuthToken"),
    how: ROLE_PASSWORDS_HOW,
    standIn: () => Object.fromEntries(WORKLOAD_ROLE_NAMES.map((r) => [r, `stand-in-${r}-0123456789abcdef`])),
  },
  {
    // The old AUTH token: never asked for, listed so the offline runs pass it on as a secret.
    key: "llm-ha:redisAuthToken",
    secret: true,
    needed: () => false,
    how: 'pulumi config set --secret llm-ha:redisAuthToken "$(openssl rand -hex 32)"   # the old way: one token, every permission',
    standIn: () => "test-token-0123456789abcdef",
  },
  {
    key: "llm-ha:dns.zoneId",
    secret: false,
    needed: () => true,
    how: "pulumi config set --path 'llm-ha:dns.zoneId' <id from: aws route53 list-hosted-zones>",
    standIn: (stack: string) => `ZSTANDIN${stack.toUpperCase().replace(/[^A-Z0-9]/g, "")}`,
  },
  {
    key: "llm-ha:dns.serviceName",
    secret: false,
    needed: () => true,
    how: "pulumi config set --path 'llm-ha:dns.serviceName' infer.<your domain in that zone>",
    standIn: (stack: string) => `infer-${stack}.llm-ha-stand-in.net`,
  },
  {
    key: "llm-ha:apiEndpoint",
    secret: false,
    // An existing cluster's endpoint is the operator's (llm-ha:existingCluster).
    needed: (values) => values["llm-ha:existingCluster"] === undefined,
    how: "pulumi config set --path 'llm-ha:apiEndpoint.access' public && pulumi config set --path 'llm-ha:apiEndpoint.publicAccessCidrs[0]' <your IP>/32 (or access private + runnerCidrs)",
    standIn: () => ({ access: "public", publicAccessCidrs: ["198.51.100.0/24"] }),
  },
  {
    key: "llm-ha:agentImage",
    secret: false,
    needed: (values: Record<string, string>) => values["llm-ha:agentImageBuild"] !== "true",
    how: "push agent/Dockerfile's image to the stack's ECR repository, then pulumi config set llm-ha:agentImage <repo>@sha256:<digest> (or pulumi config set llm-ha:agentImageBuild true)",
    standIn: () => `123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha/agent@sha256:${"5a".repeat(32)}`,
  },
  {
    key: "llm-ha:inferenceApiKey",
    secret: true,
    needed: () => true,
    how: 'pulumi config set --secret llm-ha:inferenceApiKey "$(openssl rand -hex 32)"   # vLLM --api-key; the agents send it',
    standIn: () => "stand-in-inference-key-0123456789abcdef",
  },
  {
    key: "llm-ha:edge.certificateArn",
    secret: false,
    needed: (values: Record<string, string>) => json(values, "llm-ha:edge").plainHttp !== true,
    how: "aws acm request-certificate --domain-name <llm-ha:dns.serviceName> --validation-method DNS (add its CNAME to the hosted zone), then pulumi config set --path 'llm-ha:edge.certificateArn' <its ARN>",
    standIn: () => "arn:aws:acm:us-east-1:000011112222:certificate/00000000-0000-4000-8000-000000000000",
  },
  {
    key: "llm-ha:images.dockerHubSecretArn",
    secret: false,
    needed: () => true,
    // The token from a file: on the command line it would stay in the shell's history and show in ps.
    how: "aws secretsmanager create-secret --name ecr-pullthroughcache/docker-hub --secret-string file://docker-hub.json  # docker-hub.json holds {\"username\":\"<Docker Hub user>\",\"accessToken\":\"<access token>\"}; then pulumi config set --path 'llm-ha:images.dockerHubSecretArn' <its ARN>",
    standIn: () => "arn:aws:secretsmanager:us-east-1:000011112222:secret:ecr-pullthroughcache/docker-hub-StandIn",
  },
  ...digestSettings(),
  {
    // Prod loads the model from a copy in S3 (a bucket of the user's), never from the hub.
    key: "llm-ha:inference.weightsS3Uri",
    secret: false,
    needed: (_values: Record<string, string>, stack: string) => S3_WEIGHTS_STACKS.includes(stack),
    how: "copy the model to S3 (docs/infra.md \"Wake path\": huggingface-cli download, aws s3 sync, the manifest), then pulumi config set --path 'llm-ha:inference.weightsS3Uri' s3://<bucket>/<prefix>",
    standIn: (stack: string) => `s3://llm-ha-stand-in-weights/${stack}`,
  },
  {
    key: "llm-ha:inference.revision",
    secret: false,
    needed: (values: Record<string, string>, stack: string) => weightsS3(values) || S3_WEIGHTS_STACKS.includes(stack),
    how: "pin the commit the S3 copy holds: pulumi config set --path 'llm-ha:inference.revision' <40 hex> (the model's current one: " + revisionCommand("<model>") + ")",
    standIn: () => "0".repeat(40),
  },
  {
    key: "llm-ha:hfToken",
    secret: true,
    needed: (values: Record<string, string>, stack: string) => gatedModel(values) && !weightsS3(values) && !S3_WEIGHTS_STACKS.includes(stack),
    how: "accept the model's licence on huggingface.co, then pulumi config set --secret llm-ha:hfToken hf_…",
    standIn: () => "hf_stand_in_token_for_offline_runs",
  },
]);

/** The image digests no default pins (infra/images.ts): each a setting with the command that reads it. */
function digestSettings(): UserSetting[] {
  const needed: Record<string, (values: Record<string, string>, stack: string) => boolean> = {
    haproxy: (values) => json(values, "llm-ha:haproxy").image === undefined,
    awsCli: (values) => weightsS3(values) && json(values, "llm-ha:inference").weightsLoad === "sync",
    // An existing cluster runs its own load balancer controller: the stack installs none.
    lbController: (values) => values["llm-ha:existingCluster"] === undefined,
  };
  return Object.entries(IMAGES)
    .filter(([, image]) => image.digest === null)
    .map(([name, image]) => ({
      key: `llm-ha:images.${image.setting}`,
      secret: false,
      needed: needed[name] ?? (() => true),
      how: `${digestCommand(image)}, then pulumi config set --path 'llm-ha:images.${image.setting}' sha256:…`,
      standIn: () => `sha256:${"5a".repeat(32)}`,
    }));
}

/** Whether `key` has a value in `values` (the CLI's flat map: objects as JSON). */
export function hasSetting(values: Record<string, string>, key: string): boolean {
  const [top, ...path] = key.split(".");
  if (path.length === 0) return values[top] !== undefined && values[top] !== "";
  let v: unknown = json(values, top);
  for (const k of path) v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined;
  return v !== undefined && v !== "";
}

/** The user settings this stack needs and lacks. */
export function missingUserSettings(values: Record<string, string>, stack: string): UserSetting[] {
  return USER_SETTINGS.filter((s) => s.needed(values, stack) && !hasSetting(values, s.key));
}

/**
 * `values` with every missing user setting filled by its stand-in, the keys it filled, and the
 * secret keys (for `setAllConfig`). For offline runs only.
 */
export function withStandIns(values: Record<string, string>, stack: string): { values: Record<string, string>; filled: string[]; secretKeys: string[] } {
  const out = { ...values };
  const filled: string[] = [];
  for (const s of missingUserSettings(values, stack)) {
    const [top, ...path] = s.key.split(".");
    const v = s.standIn(stack);
    if (path.length === 0) out[top] = typeof v === "string" ? v : JSON.stringify(v);
    else {
      const o = json(out, top);
      o[path[0]] = v;
      out[top] = JSON.stringify(o);
    }
    filled.push(s.key);
  }
  return { values: out, filled, secretKeys: USER_SETTINGS.filter((s) => s.secret).map((s) => s.key) };
}
