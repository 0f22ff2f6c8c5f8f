/** How the L1 pod's long-running commands (`llm-ha fallback`, `llm-ha continue`) start and stop. */
import { ListenError } from "../util/net";

export interface ServiceCommand {
  /** The command's name in messages (`llm-ha <name>`). */
  name: string;
  help: () => string;
  /** Parses the settings and starts the service; a bad setting throws an error `isConfigError` knows. */
  start: () => Promise<{ close(): Promise<void> }>;
  isConfigError: (err: unknown) => boolean;
}

/**
 * `--help`, start-up (a bad setting exits 2 with the message; a listener it cannot open exits
 * the process with 1 and the message), then running until SIGTERM/SIGINT (-1: keep running).
 */
export async function serveCommand(argv: string[], c: ServiceCommand): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(c.help());
    return 0;
  }
  let running: { close(): Promise<void> };
  try {
    running = await c.start();
  } catch (err) {
    if (c.isConfigError(err)) {
      process.stderr.write(`llm-ha ${c.name}: bad configuration: ${(err as Error).message}\n`);
      return 2;
    }
    // A listener that cannot be opened names its setting: the message says it all, without a
    // stack trace under it. What did start (another listener, a cluster worker's channel) would
    // keep the process alive: it exits here, as on any error.
    if (err instanceof ListenError) {
      process.stderr.write(`llm-ha ${c.name}: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const stop = (): void => {
    void running.close().then(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  return -1;
}
