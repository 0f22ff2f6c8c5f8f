/**
 * `llm-ha gameday --stack ENV --dry-run [--scenario NAME]`: the game day's plan from the stack
 * file alone (no cloud, no Pulumi CLI), resolved as the Pulumi program resolves it: for each
 * template `llm-ha:gameday` makes (infra/gameday/), what FIS would do, to what (the blast
 * radius: the targets' selection, tags, filters and ARNs), for how long, which alarm stops it
 * and what it means, and what its role may do. A stack without `gameday.enabled` gets the plan
 * it would have once enabled, said so at the top.
 *
 * Starting one (traffic, watching, the drill's report) is lab/gameday/command.ts's; it calls
 * this module for the plan and for the stack's settings.
 */
import { parseArgs } from "node:util";
import * as pulumi from "@pulumi/pulumi";
import { GAMEDAY_SCENARIOS, type GamedayScenario } from "../../contracts/gameday";
import { didYouMean, flagErrorMessage } from "../../contracts/did-you-mean";
import { resolveConfig } from "../config";
import { findStack, UsageError } from "../cost/command";
import { readStackFile, StackYamlError } from "../stack-yaml";
import { withStandIns } from "../user-settings";
import { stopThreshold } from "./alarms";
import { scenarioSpec, type FisTarget, type ScenarioSpec, type StopAlarm } from "./scenarios";

const USAGE = `Usage: llm-ha gameday --stack ENV --dry-run [--scenario NAME] [--json]

The game day's plan for one stack: each AWS FIS experiment template llm-ha:gameday makes
(docs/infra.md "Game day"), what it does, its blast radius, its stop condition and its role,
from the stack file alone (no cloud, no Pulumi CLI).

  --stack ENV        dev, staging, prod (a Pulumi.<ENV>.yaml beside Pulumi.yaml), or a path to one
  --dry-run          print the plan (without it, llm-ha gameday starts an experiment: see llm-ha gameday --help)
  --scenario NAME    one template: ${GAMEDAY_SCENARIOS.join(", ")} (default every one the stack makes)
  --json             the plan as JSON
  -h, --help         this text

Exit status: 0 plan printed, 2 bad arguments, unknown stack, or stack settings the program refuses.
`;

interface Args {
  stack: string;
  scenario?: GamedayScenario;
  json: boolean;
}

const OPTIONS = {
  stack: { type: "string" },
  "dry-run": { type: "boolean" },
  scenario: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function parseCli(argv: string[]): Args | "help" {
  let values: { stack?: string; "dry-run"?: boolean; scenario?: string; json?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }));
  } catch (e) {
    throw new UsageError(flagErrorMessage(e, Object.keys(OPTIONS)));
  }
  if (values.help) return "help";
  if (!values.stack) throw new UsageError("--stack is required");
  return { stack: values.stack, scenario: values.scenario === undefined ? undefined : scenarioArg(values.scenario), json: values.json === true };
}

/** `--scenario`'s value as a scenario, or the usage error naming the known ones (the plan and the run share it). */
export function scenarioArg(s: string): GamedayScenario {
  if (!(GAMEDAY_SCENARIOS as readonly string[]).includes(s)) throw new UsageError(`--scenario ${JSON.stringify(s)}: one of ${GAMEDAY_SCENARIOS.join(", ")}${didYouMean(s, GAMEDAY_SCENARIOS)}`);
  return s as GamedayScenario;
}

/** One template in the plan. */
export interface PlannedTemplate {
  scenario: GamedayScenario;
  template: string;
  description: string;
  blastRadius: string[];
  actions: string[];
  stop: { alarm: string; firesWhen: string };
  role: string[];
  caveat?: string;
}

export interface GamedayPlan {
  stack: string;
  file: string;
  cluster: string;
  region: string;
  /** Whether the stack file turns the game day on (else: the plan once it is). */
  enabled: boolean;
  activeAzs: string[];
  standbyAz: string | null;
  durationMinutes: number;
  log: string;
  templates: PlannedTemplate[];
}

/** How a target selects: `COUNT(1)` of the type, tagged so, filtered so, or these ARNs. */
export function describeTarget(t: FisTarget): string {
  const parts = [`${t.selectionMode} of ${t.resourceType}`];
  if (t.resourceArns?.length) parts.push(`ARN ${t.resourceArns.join(", ")}`);
  if (t.resourceTags) parts.push(`tagged ${Object.entries(t.resourceTags).map(([k, v]) => `${k}=${v}`).join(", ")}`);
  for (const f of t.filters ?? []) parts.push(`${f.path} in [${f.values.join(", ")}]`);
  if (t.parameters) parts.push(Object.entries(t.parameters).map(([k, v]) => `${k}=${v}`).join(", "));
  return `${t.name}: ${parts.join("; ")}`;
}

function stopMeaning(kind: StopAlarm, active: string[]): string {
  const n = stopThreshold(kind, active.length);
  const what = kind === "anyActiveAz" ? "any active AZ" : "more than one active AZ";
  return `${what} fails its Route53 health check in a minute (healthy active AZs of ${active.join(", ")} below ${n}; missing data counts as failing)`;
}

/** The plan from resolved values; ids that exist only once deployed are named by what they are. */
export function planGameday(o: { stack: string; file: string; project: string; enabled: boolean; cluster: string; region: string; azs: string[]; standbyAz?: string; scenarios: GamedayScenario[]; az: string; redisAz: string; durationMinutes: number; gpuClasses: string[] }): GamedayPlan {
  const active = o.azs.filter((a) => a !== o.standbyAz);
  const context = {
    region: o.region,
    account: "<account>",
    project: o.project,
    environment: o.stack,
    clusterName: o.cluster,
    az: o.az,
    redisAz: o.redisAz,
    durationMinutes: o.durationMinutes,
    gpuClasses: o.gpuClasses,
    vpcId: "<the stack's VPC>",
    subnetId: `<the stack's private subnet in ${o.az}>`,
    replicationGroupId: `<the stack's Redis replication group>`,
    redisEndpoint: `<the stack's Redis primary endpoint>`,
  };
  const templates = o.scenarios.map((scenario): PlannedTemplate => {
    const spec: ScenarioSpec = scenarioSpec(scenario, context);
    return {
      scenario,
      template: `gameday-${scenario}`,
      description: spec.description,
      blastRadius: spec.targets.map(describeTarget),
      actions: spec.actions.map((a) => `${a.name}: ${a.actionId} on ${a.target[0]}=${a.target[1]}${Object.keys(a.parameters).length ? ` (${Object.entries(a.parameters).map(([k, v]) => `${k}=${v}`).join(", ")})` : ""}${a.startAfter?.length ? ` after ${a.startAfter.join(", ")}` : ""}`),
      stop: { alarm: `${o.cluster}-gameday-stop-${spec.stopAlarm}`, firesWhen: stopMeaning(spec.stopAlarm, active) },
      role: spec.statements.map((s) => {
        const actions = ([] as string[]).concat((s.Action as string | string[] | undefined) ?? []);
        const res = ([] as string[]).concat((s.Resource as string | string[] | undefined) ?? []);
        return `${actions.join(", ")} on ${res.join(", ")}${s.Condition ? ` if ${JSON.stringify(s.Condition)}` : ""}`;
      }),
      ...(spec.caveat ? { caveat: spec.caveat } : {}),
    };
  });
  return { stack: o.stack, file: o.file, cluster: o.cluster, region: o.region, enabled: o.enabled, activeAzs: active, standbyAz: o.standbyAz ?? null, durationMinutes: o.durationMinutes, log: `/aws/fis/${o.cluster}`, templates };
}

export function renderPlan(p: GamedayPlan): string {
  const out: string[] = [];
  out.push(`Game day plan for ${p.stack} (${p.file}): cluster ${p.cluster}, ${p.region}; active AZs ${p.activeAzs.join(", ")}${p.standbyAz ? `, standby ${p.standbyAz} (left out of the stop alarms: asleep, its check fails by design)` : ""}`);
  out.push(
    p.enabled
      ? `llm-ha:gameday is on: pulumi up keeps these ${p.templates.length} templates; creating them changes nothing until someone starts an experiment.`
      : `llm-ha:gameday is off in ${p.file}: this is the plan once it is on (set llm-ha:gameday to {"enabled": true} and run pulumi up); nothing exists yet.`,
  );
  out.push(`Each fault holds ${p.durationMinutes} min at most; FIS logs every experiment to ${p.log} (90 days).`, "");
  for (const t of p.templates) {
    out.push(`${t.scenario}  (FIS template ${t.template}, tag llm-ha.io/gameday=${t.scenario})`);
    out.push(`  what:         ${t.description}`);
    t.blastRadius.forEach((b, i) => out.push(`  ${i === 0 ? "blast radius:" : "             "} ${b}`));
    t.actions.forEach((a, i) => out.push(`  ${i === 0 ? "actions:     " : "             "} ${a}`));
    out.push(`  stops when:   alarm ${t.stop.alarm} fires: ${t.stop.firesWhen}`);
    t.role.forEach((r, i) => out.push(`  ${i === 0 ? "role may:    " : "             "} ${r}`));
    if (t.caveat) out.push(`  caveat:       ${t.caveat}`);
    out.push("");
  }
  out.push("Start one (once pulumi up made them): aws fis start-experiment --experiment-template-id \\");
  out.push(`  $(aws fis list-experiment-templates --region ${p.region} --query "experimentTemplates[?tags.\\"llm-ha.io/gameday\\"=='NAME' && tags.Environment=='${p.stack}'].id | [0]" --output text)`);
  return out.join("\n") + "\n";
}

/** The stack's game-day settings, resolved as the Pulumi program resolves them (with `enabled` on, so they are validated). */
export interface GamedayStack {
  stack: string;
  file: string;
  project: string;
  enabled: boolean;
  cfg: ReturnType<typeof resolveConfig>;
}

/** Reads and validates a stack file for the game day; throws `UsageError`, `StackYamlError` or Pulumi's `InputPropertiesError`. */
export function loadGamedayStack(stackArg: string): GamedayStack {
  const sf = findStack(stackArg);
  const file = readStackFile(sf.file);
  const { values, secretKeys } = withStandIns(file, sf.stack);
  // The plan once enabled: the stack's own game day settings, with `enabled` on, through the program's validation.
  const key = `${sf.project}:gameday`;
  let own: Record<string, unknown>;
  try {
    own = values[key] ? (JSON.parse(values[key]) as Record<string, unknown>) : {};
  } catch {
    throw new UsageError(`${key} in ${sf.file} is not a JSON object`);
  }
  pulumi.runtime.setAllConfig({ ...values, [key]: JSON.stringify({ ...own, enabled: true }) }, secretKeys.filter((k) => !k.includes(".")));
  const cfg = resolveConfig({ project: new pulumi.Config(sf.project), aws: new pulumi.Config("aws"), stack: sf.stack });
  return { stack: sf.stack, file: sf.file, project: sf.project, enabled: own.enabled === true, cfg };
}

/** Prints a command's refusal the same way for every error the stack's reading can raise; null for others. */
export function stackErrorExit(err: unknown, usage: string): number | null {
  if (err instanceof UsageError || err instanceof StackYamlError) {
    process.stderr.write(`llm-ha gameday: ${err.message}\n${err instanceof UsageError ? `\n${usage}` : ""}`);
    return 2;
  }
  if (pulumi.InputPropertiesError.isInstance(err)) {
    process.stderr.write(`llm-ha gameday: ${err.message}\n`);
    return 2;
  }
  return null;
}

export async function gamedayCommand(argv: string[]): Promise<number> {
  try {
    const args = parseCli(argv);
    if (args === "help") {
      process.stdout.write(USAGE);
      return 0;
    }
    const { stack, file, project, enabled, cfg } = loadGamedayStack(args.stack);
    const key = `${project}:gameday`;
    const scenarios = args.scenario ? [args.scenario] : cfg.gameday.scenarios;
    if (args.scenario && !cfg.gameday.scenarios.includes(args.scenario)) {
      throw new UsageError(`--scenario ${args.scenario}: ${key}.scenarios in ${file} leaves it out (${cfg.gameday.scenarios.join(", ")})`);
    }
    const plan = planGameday({
      stack, file, project, enabled, cluster: cfg.clusterName, region: cfg.region, azs: cfg.azs, standbyAz: cfg.standbyAz,
      scenarios, az: cfg.gameday.az, redisAz: cfg.gameday.redisAz, durationMinutes: cfg.gameday.durationMinutes, gpuClasses: cfg.gpuClasses.map((g) => g.name),
    });
    process.stdout.write(args.json ? JSON.stringify(plan, null, 2) + "\n" : renderPlan(plan));
    return 0;
  } catch (err) {
    const code = stackErrorExit(err, USAGE);
    if (code !== null) return code;
    throw err;
  }
}
