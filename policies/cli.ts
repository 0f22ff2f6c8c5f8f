// `npm run policy -- --stack prod`: what a developer runs before pushing. Runs the infra
// program for one environment under Pulumi's mocks (no cloud, no Pulumi CLI), evaluates
// the pack over what it registered, prints the violations as a table and exits 1 when any
// is mandatory, as `pulumi preview --policy-pack policies` would fail.
import * as fs from "node:fs";
import { parseArgs } from "node:util";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { captureStack, stackStandIns, StackYamlError, type Env } from "../infra/capture";
import { policies } from "./all";
import { flagErrorMessage } from "../contracts/did-you-mean";
import { PolicyConfigError, policyLevel, runPolicies, type PackConfig, type Violation } from "./runner";

const ENVS: readonly Env[] = ["dev", "staging", "prod", "byo"];

const USAGE = `Usage: llm-ha policy --stack <dev|staging|prod|byo|path/to/Pulumi.<stack>.yaml> [--policy-pack-config <file.json>]
       (also: npm run policy -- --stack ENV)

Runs the policy pack over what the stack's program registers, offline (Pulumi's mocks: no cloud,
no Pulumi CLI), as \`pulumi preview --policy-pack policies\` would.

  -s, --stack ENV                dev, staging, prod, byo (an existing cluster), or a path to a Pulumi.<stack>.yaml
  --policy-pack-config FILE      per-policy settings (JSON keyed by policy name)
  --json, -o json                one JSON document: policies run, stand-ins, violations
  -h, --help                     this text

It lists the policies it ran, and the settings the stack file leaves out (zone, image, tokens…)
that it filled with stand-ins: policies reading those judged a placeholder, not your value —
\`llm-ha preflight --stack ENV\` says how to set each.

exit codes: 0 no mandatory violation, 1 mandatory violations, 2 bad input (flags, a stack file that
cannot be read or parsed, or stack settings the program refuses)`;

/** Bad command-line input: printed with the usage, exit code 2. */
export class PolicyCliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PolicyCliError";
  }
}

interface CliArgs {
  /** The stack's name: an environment of this repository, or the `<stack>` of a file's name. */
  env: string;
  /** A stack file other than the repository's `Pulumi.<env>.yaml`. */
  file?: string;
  config?: PackConfig;
  json?: boolean;
}

/** The arguments, or "help" for `--help`. Throws `PolicyCliError`. */
export function parseCli(argv: string[]): CliArgs | "help" {
  let values: { stack?: string; "policy-pack-config"?: string; help?: boolean; json?: boolean; output?: string };
  const options = {
    stack: { type: "string", short: "s" },
    "policy-pack-config": { type: "string" },
    json: { type: "boolean" },
    output: { type: "string", short: "o" },
    help: { type: "boolean", short: "h" },
  } as const;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true }));
  } catch (e) {
    throw new PolicyCliError(flagErrorMessage(e, Object.keys(options)));
  }
  if (values.help) return "help";
  if (values.output !== undefined && values.output !== "json" && values.output !== "text") throw new PolicyCliError(`-o/--output must be json or text, got ${JSON.stringify(values.output)}`);
  const json = values.json === true || values.output === "json";
  const stack = values.stack;
  let target: { env: string; file?: string };
  if (stack !== undefined && (stack.includes("/") || stack.endsWith(".yaml"))) {
    const m = /^Pulumi\.(.+)\.yaml$/.exec(path.basename(stack));
    if (!m) throw new PolicyCliError(`--stack ${stack}: a stack file is named Pulumi.<stack>.yaml`);
    target = { env: m[1], file: stack };
  } else if (stack !== undefined && ENVS.includes(stack as Env)) {
    target = { env: stack };
  } else {
    throw new PolicyCliError(`--stack must be one of ${ENVS.join(", ")} or a path to a Pulumi.<stack>.yaml${stack === undefined ? "" : ` (got ${stack})`}`);
  }
  const file = values["policy-pack-config"];
  if (file === undefined) return { ...target, json };
  let config: unknown;
  try {
    config = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    throw new PolicyCliError(`--policy-pack-config ${file}: ${(e as Error).message}`);
  }
  if (typeof config !== "object" || config === null || Array.isArray(config)) {
    throw new PolicyCliError(`--policy-pack-config ${file}: expected a JSON object keyed by policy name`);
  }
  return { ...target, json, config: config as PackConfig };
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

/** `head` then the names, comma-separated, wrapped under 100 columns with a two-space indent. */
function wrapList(head: string, names: readonly string[]): string {
  const lines = [head.trimEnd()];
  for (const n of names) {
    const last = lines.length - 1;
    const add = `${lines[last].endsWith(":") ? " " : ", "}${n}`;
    if (lines[last].length + add.length > 100) {
      if (!lines[last].endsWith(":")) lines[last] += ",";
      lines.push(`  ${n}`);
    }
    else lines[last] += add;
  }
  return lines.join("\n");
}

export async function main(argv: string[]): Promise<number> {
  let args: CliArgs;
  try {
    const parsed = parseCli(argv);
    if (parsed === "help") {
      process.stdout.write(USAGE + "\n");
      return 0;
    }
    args = parsed;
  } catch (e) {
    if (!(e instanceof PolicyCliError)) throw e;
    console.error(`llm-ha policy: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  let resources;
  try {
    resources = await captureStack(args.env, {}, args.file);
  } catch (e) {
    // A stack that cannot be evaluated is bad input, not "violations found" (exit 1).
    if (e instanceof StackYamlError || pulumi.InputPropertiesError.isInstance(e)) {
      console.error(`${args.file ?? `Pulumi.${args.env}.yaml`}: ${e.message}`);
      return 2;
    }
    throw e;
  }
  let violations: Violation[];
  try {
    violations = await runPolicies(policies, resources, { config: args.config });
  } catch (e) {
    if (!(e instanceof PolicyConfigError)) throw e;
    console.error(e.message);
    return 2;
  }
  const blocking = violations.filter((v) => v.enforcementLevel === "mandatory").length;
  const ran = policies.filter((p) => policyLevel(p, { config: args.config }) !== "disabled").map((p) => p.name);
  const standIns = stackStandIns(args.env, args.file);
  const stackFile = args.file ?? `Pulumi.${args.env}.yaml`;
  if (args.json) {
    const doc = { version: 1, stack: args.env, file: stackFile, resources: resources.length, policies: ran, standIns, mandatory: blocking, advisory: violations.length - blocking, violations };
    process.stdout.write(JSON.stringify(doc, null, 2) + "\n");
    return blocking > 0 ? 1 : 0;
  }
  if (violations.length > 0) console.log(formatTable(violations) + "\n");
  console.log(wrapList(`policies run (${ran.length}): `, ran));
  if (standIns.length > 0) {
    console.log(
      wrapList(`stand-ins (${standIns.length}): `, standIns) +
        `\n  ${stackFile} leaves these out; this offline run filled them with placeholders, so policies reading them` +
        `\n  judged a placeholder, not your value. llm-ha preflight --stack ${args.file ?? args.env} says how to set each.`,
    );
  }
  console.log(
    `\n${args.env}: ${resources.length} resources, ${ran.length} policies, ${blocking} mandatory and ${violations.length - blocking} advisory violations` +
      (standIns.length > 0 ? ` (${standIns.length} settings were stand-ins)` : ""),
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
