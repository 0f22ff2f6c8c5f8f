import { ConfigError, helpText, loadConfig, unknownSettings } from "./config/load";
import { runRole, StartupError } from "./main";

export const USAGE = `llm-ha — keeps LLM inference on GPUs answering when a GPU, a node, a zone or a dependency fails

Usage:
  llm-ha agent [flags]     run the health agent on a GPU node (llm-ha agent --help for every flag);
                           LLMHA_ROLE=controller runs the controller alone (system nodes), node never leads
  llm-ha status [flags]    show the fleet from Redis (--watch, --json)
  llm-ha practice [flags]  ask the leader for a practice wake of the standby now (status flags)
  llm-ha canary CMD        correctness canaries: show the expected answers, record [--model KEY] [--node ID]
  llm-ha fallback [flags]  the L4 service: verified-answer cache, provider failover, Kafka queue (--help)
  llm-ha cache CMD         verified answers: import FILE.jsonl, list, rm KEY
  llm-ha keys CMD          client API keys of the public edge: add, list, rotate, revoke (--help)
  llm-ha edge-sync [flags] copy the client keys into the L1 proxies' HAProxy map (the L1 pod; --help)
  llm-ha redis-acl [flags] the Redis roles as a redis-server ACL file or ElastiCache access strings (--help)
  llm-ha help              this text
`;

async function agentCommand(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(helpText());
    return 0;
  }
  for (const u of unknownSettings(process.env)) {
    process.stderr.write(`llm-ha agent: warning: ${u.name} is not a setting and is ignored${u.suggestion ? ` (did you mean ${u.suggestion}?)` : ""}\n`);
  }
  let cfg;
  try {
    cfg = await loadConfig(argv, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`llm-ha agent: bad configuration: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  let running;
  try {
    running = await runRole(cfg);
  } catch (err) {
    if (err instanceof StartupError) {
      process.stderr.write(`llm-ha agent: cannot start: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const stop = (sig: string): void => {
    void running.shutdown(sig).then(() => process.exit(0));
  };
  process.once("SIGTERM", () => stop("SIGTERM"));
  process.once("SIGINT", () => stop("SIGINT"));
  return -1; // keep running
}

/** The image's commands; a checkout's `lab/cli.ts` adds the drill and the operator tools. */
export async function main(argv: string[], usage = USAGE): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case "agent":
      return agentCommand(rest);
    case "status": {
      const { statusCommand } = await import("./status/command.js");
      return statusCommand(rest);
    }
    case "practice": {
      const { practiceCommand } = await import("./status/practice-request.js");
      return practiceCommand(rest);
    }
    case "canary": {
      const { canaryCommand } = await import("./canary/command.js");
      return canaryCommand(rest);
    }
    case "fallback": {
      const { fallbackCommand } = await import("./fallback/command.js");
      return fallbackCommand(rest);
    }
    case "cache": {
      const { cacheCommand } = await import("./fallback/command.js");
      return cacheCommand(rest);
    }
    case "keys": {
      const { keysCommand } = await import("./edge/command.js");
      return keysCommand(rest);
    }
    case "edge-sync": {
      const { edgeSyncCommand } = await import("./edge/command.js");
      return edgeSyncCommand(rest);
    }
    case "redis-acl": {
      const { redisAclCommand } = await import("./redis/acl-command.js");
      return redisAclCommand(rest);
    }
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(usage);
      return 0;
    default:
      process.stderr.write(`llm-ha: unknown command ${JSON.stringify(cmd)}\n\n${usage}`);
      return 2;
  }
}

/** Runs the CLI as a process: exit code from `main`, -1 keeps running (the agent). */
export function run(argv: string[], entry: (argv: string[]) => Promise<number> = main): void {
  entry(argv).then(
    (code) => {
      if (code >= 0) process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`llm-ha: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}

if (require.main === module) run(process.argv.slice(2));
