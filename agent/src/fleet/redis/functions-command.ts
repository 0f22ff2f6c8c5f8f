/**
 * `llm-ha redis-functions`: llm-ha's Redis Functions libraries (functions.ts) at deploy time,
 * with the break-glass user (`llmha-breakglass`; the controller also loads them when it
 * connects). Credentials as for every llm-ha process: `LLMHA_REDIS_URL` with
 * `LLMHA_REDIS_USER` / `LLMHA_REDIS_PASSWORD_FILE`, never on the command line.
 */
import { parseArgs } from "node:util";
import { flagErrorMessage } from "../../../../contracts/did-you-mean";
import { createLogger } from "../../util/log";
import { createRedisClient, describeRedisError } from "./client";
import { loadLibrary } from "./functions";
import { allLibraries } from "./libraries";

export const REDIS_FUNCTIONS_HELP = `llm-ha redis-functions — llm-ha's Lua as Redis Functions libraries (no role may EVAL)

Usage:
  llm-ha redis-functions load     FUNCTION LOAD this build's libraries (those Redis lacks)
  llm-ha redis-functions list     the llm-ha libraries Redis holds; * marks this build's
  llm-ha redis-functions prune    FUNCTION DELETE llm-ha libraries of other builds (after a rollout)
  llm-ha redis-functions print    this build's libraries' code (no Redis)

  Redis: $LLMHA_REDIS_URL, as $LLMHA_REDIS_USER (llmha-breakglass) with the password in
  $LLMHA_REDIS_PASSWORD_FILE. Libraries are named llmha_<fleet|fallback>_<version>.
`;

type Listed = [string, string, ...unknown[]];

/** Library names from a `FUNCTION LIST` reply (RESP2: flat [key, value, …] per library). */
function libraryNames(reply: unknown): string[] {
  return (reply as Listed[]).map((lib) => {
    const i = lib.indexOf("library_name");
    return String(lib[i + 1]);
  });
}

export async function redisFunctionsCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const fail = (msg: string, code = 2): number => {
    process.stderr.write(`llm-ha redis-functions: ${msg}\n`);
    return code;
  };
  let positionals: string[];
  let values: { help?: boolean };
  const options = { help: { type: "boolean", short: "h" } } as const;
  try {
    ({ values, positionals } = parseArgs({ args: argv, strict: true, allowPositionals: true, options }));
  } catch (err) {
    return fail(`${flagErrorMessage(err, Object.keys(options))} (see llm-ha redis-functions --help)`);
  }
  const action = positionals[0];
  if (values.help) {
    process.stdout.write(REDIS_FUNCTIONS_HELP);
    return 0;
  }
  if (action === undefined) return fail("an action is required: load, list, prune or print (see llm-ha redis-functions --help)");
  if (!["load", "list", "prune", "print"].includes(action) || positionals.length > 1) return fail(`unknown action ${JSON.stringify(positionals.join(" "))}: load, list, prune or print`);
  const libs = allLibraries();
  if (action === "print") {
    for (const l of libs) process.stdout.write(`${l.code}\n`);
    return 0;
  }
  const url = env.LLMHA_REDIS_URL;
  if (!url) return fail("LLMHA_REDIS_URL is required");
  const log = createLogger({ level: env.LLMHA_LOG_LEVEL ?? "warn" });
  let client;
  try {
    client = createRedisClient(url, { name: "llmha-redis-functions", log, env, commandTimeoutMs: 5000, followEndpointMs: 0 });
  } catch (err) {
    return fail((err as Error).message);
  }
  try {
    if (!(await client.whenReady(5000))) return fail(`cannot reach Redis at ${client.safeUrl}`, 1);
    const r = client.redis;
    if (action === "load") {
      for (const l of libs) {
        await loadLibrary(r, l);
        process.stdout.write(`loaded ${l.name} (${l.specs.size} functions)\n`);
      }
      return 0;
    }
    const held = libraryNames(await r.call("FUNCTION", "LIST", "LIBRARYNAME", "llmha_*"));
    const ours = new Set(libs.map((l) => l.name));
    if (action === "list") {
      for (const name of held.sort()) process.stdout.write(`${ours.has(name) ? "*" : " "} ${name}\n`);
      for (const l of libs) if (!held.includes(l.name)) process.stdout.write(`  (missing: ${l.name}, this build's: run llm-ha redis-functions load)\n`);
      return 0;
    }
    for (const name of held.filter((n) => !ours.has(n) && /^llmha_[a-z]+_[0-9a-f]+$/.test(n))) {
      await r.call("FUNCTION", "DELETE", name);
      process.stdout.write(`deleted ${name}\n`);
    }
    return 0;
  } catch (err) {
    return fail(describeRedisError((err as Error).message), 1);
  } finally {
    await client.close();
  }
}
