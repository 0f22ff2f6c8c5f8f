import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ConfigError, helpText, loadConfig, unknownSettings } from "./config/load";
import { runRole, StartupError } from "./main";
import { leanRuntime } from "./node/lean-runtime";
import { didYouMean } from "../../contracts/did-you-mean";
import { terminalColumns } from "../../contracts/table";

/** One `llm-ha` command: its line in the overview, and what runs it. */
export interface Command {
  name: string;
  /** What follows the name in the overview (`[flags]`, `CMD`, `--stack ENV`). */
  args: string;
  summary: string;
  run: (argv: string[]) => Promise<number>;
}

const HEADER = "llm-ha — keeps LLM inference on GPUs answering when a GPU, a node, a zone or a dependency fails";

/** The package's version: package.json sits two folders up in a checkout, three in the image (dist/agent/src). */
export function packageVersion(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "llm-ha" && pkg.version) return pkg.version;
    }
    if (dirname(dir) === dir) return "unknown";
  }
}

async function agentCommand(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    const columns = terminalColumns();
    process.stdout.write(helpText(Number.isFinite(columns) ? columns : undefined));
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
  // Before the agent's code runs: a process that only checks its node runs without V8's optimising compilers.
  leanRuntime(cfg);
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
export const IMAGE_COMMANDS: readonly Command[] = [
  { name: "agent", args: "[flags]", summary: "run the health agent on a GPU node (LLMHA_ROLE=controller: the controller alone)", run: agentCommand },
  { name: "status", args: "[flags]", summary: "show the fleet from Redis (--watch, -o json)", run: async (a) => (await import("./ops/status/command.js")).statusCommand(a) },
  { name: "practice", args: "[flags]", summary: "ask the leader for a practice wake of the standby now", run: async (a) => (await import("./ops/status/practice-request.js")).practiceCommand(a) },
  { name: "rollout", args: "CMD", summary: "roll a model or engine change out AZ by AZ: start, status, pause, resume, abort, promote", run: async (a) => (await import("./ops/rollout/command.js")).rolloutCommand(a) },
  { name: "canary", args: "CMD", summary: "correctness canaries: show the expected answers, record them", run: async (a) => (await import("./ops/canary.js")).canaryCommand(a) },
  { name: "fallback", args: "[flags]", summary: "the L4 service: verified-answer cache, provider failover, Kafka queue", run: async (a) => (await import("./edge/fallback/command.js")).fallbackCommand(a) },
  { name: "continue", args: "[flags]", summary: "carry a completion on when its server dies mid-answer (the L1 pod)", run: async (a) => (await import("./edge/continuation/command.js")).continueCommand(a) },
  { name: "cache", args: "CMD", summary: "verified answers: import FILE.jsonl, list, rm KEY", run: async (a) => (await import("./edge/fallback/command.js")).cacheCommand(a) },
  { name: "keys", args: "CMD", summary: "client API keys of the public edge: add, list, rotate, revoke", run: async (a) => (await import("./ops/keys.js")).keysCommand(a) },
  { name: "edge-sync", args: "[flags]", summary: "copy the client keys into the L1 proxies' HAProxy map (the L1 pod)", run: async (a) => (await import("./ops/keys.js")).edgeSyncCommand(a) },
  { name: "redis-acl", args: "[flags]", summary: "the Redis roles as a redis-server ACL file or ElastiCache access strings", run: async (a) => (await import("./fleet/redis/acl-command.js")).redisAclCommand(a) },
  { name: "redis-functions", args: "load|list|prune|print", summary: "llm-ha's Lua as Redis Functions: load this build's libraries (break-glass user), list, prune old ones", run: async (a) => (await import("./fleet/redis/functions-command.js")).redisFunctionsCommand(a) },
];

/** The overview: every command, one line each. */
export function usageText(commands: readonly Command[]): string {
  const rows = commands.map((c) => [`${c.name} ${c.args}`, c.summary]);
  const more = [["help COMMAND", "that command's flags (also: llm-ha COMMAND --help)"], ["--version", "the version"]];
  const width = Math.max(...[...rows, ...more].map(([l]) => l.length)) + 2;
  const lines = (list: string[][]): string => list.map(([l, r]) => `  llm-ha ${l.padEnd(width)}${r}`).join("\n");
  return `${HEADER}

Usage: llm-ha COMMAND [flags]

${lines(rows)}

${lines(more)}

Usage errors exit 2 and are written on stderr.
`;
}

/** Dispatches `argv` to one of `commands`; `help CMD` and `--version` are answered here. */
export async function main(argv: string[], commands: readonly Command[] = IMAGE_COMMANDS): Promise<number> {
  const [cmd, ...rest] = argv;
  const usage = usageText(commands);
  if (cmd === undefined || cmd === "--help" || cmd === "-h" || (cmd === "help" && rest.length === 0)) {
    process.stdout.write(usage);
    return 0;
  }
  if (cmd === "--version" || cmd === "-V" || cmd === "version") {
    process.stdout.write(`llm-ha ${packageVersion()}\n`);
    return 0;
  }
  const names = commands.map((c) => c.name);
  if (cmd === "help") {
    const about = commands.find((c) => c.name === rest[0]);
    if (!about || rest.length > 1) {
      process.stderr.write(`llm-ha help: ${rest.length > 1 ? "takes one command" : `unknown command ${JSON.stringify(rest[0])}${didYouMean(rest[0], names)}`}; run llm-ha help for the list\n`);
      return 2;
    }
    return about.run(["--help"]);
  }
  const command = commands.find((c) => c.name === cmd);
  if (!command) {
    const hint = cmd.startsWith("-") ? "flags go after the command" : "";
    process.stderr.write(`llm-ha: unknown command ${JSON.stringify(cmd)}${didYouMean(cmd, names)}${hint ? ` (${hint})` : ""}; run llm-ha help for the list\n`);
    return 2;
  }
  return command.run(rest);
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
