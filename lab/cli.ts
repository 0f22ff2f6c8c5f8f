/**
 * `llm-ha` from a checkout: the image's commands (agent/src/cli.ts) plus the ones that need
 * the repository — the local drill (real engines, simulated nodes) and the operator tools
 * over the stack files. bin/llm-ha runs this when the checkout is there; the image has only
 * the compiled agent CLI.
 */
import { main as imageMain, run, USAGE } from "../agent/src/cli";

const CHECKOUT_USAGE = USAGE.replace(
  "  llm-ha help",
  `  llm-ha drill [flags]     run the local drill: real Redis, HAProxy, PowerDNS and a fault matrix (checkout)
  llm-ha cost --stack ENV  GPU hours and money per month, with and without the standby schedule (checkout)
  llm-ha preflight --stack ENV [--online]  what blocks pulumi up on this account, before anything is created (checkout)
  llm-ha help`,
);

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case "drill": {
      const { drillCommand } = await import("./drill/command.js");
      return drillCommand(rest);
    }
    case "cost": {
      const { costCommand } = await import("../infra/cost/command.js");
      return costCommand(rest);
    }
    case "preflight": {
      const { preflightCommand } = await import("../infra/preflight/command.js");
      return preflightCommand(rest);
    }
    default:
      return imageMain(argv, CHECKOUT_USAGE);
  }
}

if (require.main === module) run(process.argv.slice(2), main);
