/**
 * Runs a CLI command's entry function inside the test's own process, with its output captured,
 * as `bin/llm-ha` would run it in a child: the same argv, exit code, stdout and stderr. Starting
 * tsx for each case cost 2–3 s of a 2-core machine per call; the process boundary itself (the
 * bin script, exit codes through a real process) is tested once, in test/cli/bin.test.ts.
 *
 * One command at a time per test process: stdout, stderr, the environment and the working
 * folder are the process's own, so calls queue behind each other. `console.log` and
 * `console.info` count as stdout, `console.error` and `console.warn` as stderr (vitest's own
 * console would otherwise take them).
 */
import { format } from "node:util";

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface InProcessOptions {
  /** Set (a string) or removed (undefined) for the call's duration only. */
  env?: Record<string, string | undefined>;
  /** Working folder for the call (restored after). */
  cwd?: string;
  /** Leave out every `LLMHA_*` setting of the test's own environment (as the process helpers do). */
  cleanLlmha?: boolean;
}

let queue: Promise<unknown> = Promise.resolve();

type Write = typeof process.stdout.write;

function capture(stream: NodeJS.WriteStream, into: string[]): Write {
  const original = stream.write.bind(stream) as Write;
  stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    into.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
    const cb = rest.find((r): r is () => void => typeof r === "function");
    cb?.();
    return true;
  }) as Write;
  return original;
}

async function once(entry: (argv: string[]) => Promise<number>, argv: string[], o: InProcessOptions): Promise<Ran> {
  const out: string[] = [];
  const err: string[] = [];
  const savedEnv = new Map<string, string | undefined>();
  const setEnv = (k: string, v: string | undefined): void => {
    if (!savedEnv.has(k)) savedEnv.set(k, process.env[k]);
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  };
  if (o.cleanLlmha) for (const k of Object.keys(process.env)) if (k.startsWith("LLMHA_") || k === "NO_COLOR") setEnv(k, undefined);
  for (const [k, v] of Object.entries(o.env ?? {})) setEnv(k, v);
  const cwd = process.cwd();
  const exitCode = process.exitCode;
  const stdout = capture(process.stdout, out);
  const stderr = capture(process.stderr, err);
  const consoleWas = { log: console.log, info: console.info, error: console.error, warn: console.warn };
  console.log = console.info = (...a: unknown[]) => void out.push(`${format(...a)}\n`);
  console.error = console.warn = (...a: unknown[]) => void err.push(`${format(...a)}\n`);
  try {
    if (o.cwd) process.chdir(o.cwd);
    let code: number | null;
    try {
      code = await entry(argv);
    } catch (e) {
      // What `run` in agent/src/cli.ts does with a throw: the stack on stderr, exit 1.
      err.push(`llm-ha: ${(e as Error).stack ?? String(e)}\n`);
      code = 1;
    }
    return { code, stdout: out.join(""), stderr: err.join("") };
  } finally {
    process.stdout.write = stdout;
    process.stderr.write = stderr;
    Object.assign(console, consoleWas);
    process.chdir(cwd);
    process.exitCode = exitCode;
    for (const [k, v] of savedEnv) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** Runs `entry(argv)` once the calls before it are done. */
export function runInProcess(entry: (argv: string[]) => Promise<number>, argv: string[], o: InProcessOptions = {}): Promise<Ran> {
  const next = queue.then(() => once(entry, argv, o));
  queue = next.catch(() => undefined);
  return next;
}
