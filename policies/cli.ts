// `npm run policy -- --stack prod`: what a developer runs before pushing. Runs the infra
// program for one environment under Pulumi's mocks (no cloud, no Pulumi CLI), evaluates
// the pack over what it registered, prints the violations as a table and exits 1 when any
// is mandatory, as `pulumi preview --policy-pack policies` would fail.
import * as fs from "node:fs";
import { parseArgs } from "node:util";
import { captureStack, type Env } from "../infra/capture";
import { policies } from "./all";
import { PolicyConfigError, runPolicies, type PackConfig, type Violation } from "./runner";

const ENVS: readonly Env[] = ["dev", "staging", "prod"];

const USAGE = `usage: npm run policy -- --stack <dev|staging|prod> [--policy-pack-config <file.json>]`;

/** Bad command-line input: printed with the usage, exit code 2. */
export class PolicyCliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PolicyCliError";
  }
}

interface CliArgs {
  env: Env;
  config?: PackConfig;
}

export function parseCli(argv: string[]): CliArgs {
  let values: { stack?: string; "policy-pack-config"?: string };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { stack: { type: "string", short: "s" }, "policy-pack-config": { type: "string" } },
      strict: true,
    }));
  } catch (e) {
    throw new PolicyCliError((e as Error).message);
  }
  const env = values.stack as Env | undefined;
  if (env === undefined || !ENVS.includes(env)) {
    throw new PolicyCliError(`--stack must be one of ${ENVS.join(", ")}${env === undefined ? "" : ` (got ${env})`}`);
  }
  const file = values["policy-pack-config"];
  if (file === undefined) return { env };
  let config: unknown;
  try {
    config = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    throw new PolicyCliError(`--policy-pack-config ${file}: ${(e as Error).message}`);
  }
  if (typeof config !== "object" || config === null || Array.isArray(config)) {
    throw new PolicyCliError(`--policy-pack-config ${file}: expected a JSON object keyed by policy name`);
  }
  return { env, config: config as PackConfig };
}

/** `<Type> <name>` from a URN such as `urn:pulumi:prod::llm-ha::…$aws:route53/healthCheck:HealthCheck::dns-hc-a`. */
function resourceLabel(urn: string | undefined): string {
  if (!urn) return "(stack)";
  const parts = urn.split("::");
  const type = (parts[2] ?? "").split("$").pop() ?? "";
  return `${type.split(":").pop() ?? type} ${parts[3] ?? ""}`.trim();
}

/** The violations as an aligned text table, mandatory first. */
export function formatTable(violations: readonly Violation[]): string {
  const rows = [...violations]
    .sort((a, b) => Number(b.enforcementLevel === "mandatory") - Number(a.enforcementLevel === "mandatory"))
    .map((v) => [v.policy, v.enforcementLevel, resourceLabel(v.urn), v.message]);
  const header = ["POLICY", "LEVEL", "RESOURCE", "MESSAGE"];
  const widths = header.slice(0, 3).map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [header, ...rows]
    .map((r) => r.map((cell, i) => (i < 3 ? cell.padEnd(widths[i]) : cell)).join("  "))
    .join("\n");
}

export async function main(argv: string[]): Promise<number> {
  let args: CliArgs;
  try {
    args = parseCli(argv);
  } catch (e) {
    if (!(e instanceof PolicyCliError)) throw e;
    console.error(`${e.message}\n${USAGE}`);
    return 2;
  }
  const resources = await captureStack(args.env);
  let violations: Violation[];
  try {
    violations = await runPolicies(policies, resources, { config: args.config });
  } catch (e) {
    if (!(e instanceof PolicyConfigError)) throw e;
    console.error(e.message);
    return 2;
  }
  const blocking = violations.filter((v) => v.enforcementLevel === "mandatory").length;
  if (violations.length > 0) console.log(formatTable(violations));
  console.log(
    `\n${args.env}: ${resources.length} resources, ${policies.length} policies, ${blocking} mandatory and ${violations.length - blocking} advisory violations`,
  );
  return blocking > 0 ? 1 : 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : String(e));
      process.exitCode = 1;
    },
  );
}
