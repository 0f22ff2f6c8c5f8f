/**
 * `llm-ha` from a checkout: the image's commands (agent/src/cli.ts) plus the ones that need
 * the repository — the local drill (real engines, simulated nodes) and the operator tools
 * over the stack files. bin/llm-ha runs this when the checkout is there; the image has only
 * the compiled agent CLI.
 */
import { type Command, IMAGE_COMMANDS, main as imageMain, run } from "../agent/src/cli";

/**
 * Commands bin/llm-ha runs as their own scripts (policies/cli.ts, infra/observability/cli.ts,
 * lab/bench/run.ts): the lab may not import the policy pack, and these keep their npm script
 * names as aliases. Listed here for the overview and "did you mean"; reached only through bin.
 */
const SCRIPT_COMMANDS: readonly Command[] = [
  { name: "policy", args: "--stack ENV", summary: "the CrossGuard pack over one stack, offline (= npm run policy)" },
  { name: "observability", args: "[flags]", summary: "write the alert rules and the dashboard (= npm run observability)" },
  { name: "bench", args: "[flags]", summary: "every measured figure as one JSON document (= npm run bench)" },
].map((c) => ({
  ...c,
  run: async () => {
    process.stderr.write(`llm-ha ${c.name} runs through bin/llm-ha (or npm run ${c.name})\n`);
    return 2;
  },
}));

export const CHECKOUT_COMMANDS: readonly Command[] = [
  ...IMAGE_COMMANDS,
  { name: "drill", args: "[flags]", summary: "the local drill: real Redis, HAProxy, PowerDNS and a fault matrix", run: async (a) => (await import("./drill/command.js")).drillCommand(a) },
  { name: "demo", args: "[flags]", summary: "a live demo fleet on its own Redis, faults coming and going: the llm-ha status line to paste", run: async (a) => (await import("./status/demo-command.js")).demoCommand(a) },
  { name: "cost", args: "--stack ENV", summary: "GPU hours and money per month, with and without the standby schedule", run: async (a) => (await import("../infra/cost/command.js")).costCommand(a) },
  { name: "gameday", args: "--stack ENV [--dry-run] | --local", summary: "a game day: an AWS FIS experiment with traffic and the drill's report (--dry-run: the plan; --local: against the drill)", run: async (a) => (await import("./gameday/command.js")).gamedayCommand(a) },
  { name: "preflight", args: "--stack ENV", summary: "what blocks pulumi up on this account, before anything is created", run: async (a) => (await import("../infra/preflight/command.js")).preflightCommand(a) },
  { name: "weights", args: "manifest DIR --repo R --revision REV", summary: "writes the manifest of a model download, for its S3 copy (docs/infra.md \"Wake path\")", run: async (a) => (await import("../infra/weights/command.js")).weightsCommand(a) },
  ...SCRIPT_COMMANDS,
];

export function main(argv: string[]): Promise<number> {
  return imageMain(argv, CHECKOUT_COMMANDS);
}

if (require.main === module) run(process.argv.slice(2), main);
