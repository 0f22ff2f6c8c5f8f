/**
 * The fake inference server as a process (what simulated nodes spawn): its command-line options,
 * the ready line on stdout that tells the parent which ports it got, and a clean stop on SIGTERM
 * or SIGINT. A bad argument exits 2 with a message on stderr; a query of death exits 70 at once.
 */
import { isIP } from "node:net";
import { startFakeInference } from "./server";
import {
  FakeInferenceSettingsError,
  INFERENCE_KINDS,
  parseSettingsChange,
  QUERY_OF_DEATH_EXIT_CODE,
  QUERY_OF_DEATH_MARKER,
  type FakeInference,
  type FakeInferenceOptions,
  type FakeInferenceProfile,
  type InferenceKind,
} from "./settings";

/**
 * `--host A --port P --admin-port Q --kind K --model M --mode X --latency-ms N --jitter-ms N --slow-ms N --token-ms N
 * --max-running N --query-of-death on|off --api-key K --corrupted-requests N --revision R --continuation accept|refuse
 * --corruption C --load-ms N`.
 */
export function parseFakeInferenceArgs(argv: string[]): FakeInferenceOptions {
  const opts: Record<string, unknown> = {};
  const numeric = new Set(["port", "adminPort", "latencyMs", "jitterMs", "slowMs", "tokenMs", "maxRunning", "corruptedRequests", "loadMs"]);
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new FakeInferenceSettingsError(`unexpected argument ${argv[i]}`);
    const key = m[1].replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new FakeInferenceSettingsError(`--${m[1]} needs a value`);
    if (!["host", "kind", "model", "mode", "queryOfDeath", "apiKey", "revision", "continuation", "corruption", ...numeric].includes(key)) throw new FakeInferenceSettingsError(`unknown option --${m[1]}`);
    if (key === "queryOfDeath") {
      if (value !== "on" && value !== "off") throw new FakeInferenceSettingsError(`--${m[1]} must be on or off`);
      opts[key] = value === "on";
    } else if (numeric.has(key)) {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) throw new FakeInferenceSettingsError(`--${m[1]} must be an integer >= 0`);
      opts[key] = n;
    } else {
      opts[key] = value;
    }
  }
  const { kind, host, port, adminPort, apiKey, loadMs, ...rest } = opts;
  if (kind !== undefined && !INFERENCE_KINDS.includes(kind as InferenceKind)) {
    throw new FakeInferenceSettingsError(`--kind must be one of ${INFERENCE_KINDS.join(", ")}`);
  }
  if (host !== undefined && isIP(host as string) === 0) throw new FakeInferenceSettingsError(`--host must be an IP address, got ${JSON.stringify(host)}`);
  return { ...parseSettingsChange(rest), kind: kind as InferenceKind | undefined, host: host as string | undefined, port: port as number | undefined, adminPort: adminPort as number | undefined, apiKey: apiKey as string | undefined, loadMs: loadMs as number | undefined };
}

/** The command-line flags that start a fake with `p` (what `parseFakeInferenceArgs` reads back). */
export function fakeInferenceFlags(p: FakeInferenceProfile): string[] {
  const out: string[] = [];
  if (p.revision != null) out.push("--revision", p.revision);
  if (p.latencyMs !== undefined) out.push("--latency-ms", String(Math.round(p.latencyMs)));
  if (p.corruption !== undefined) out.push("--corruption", p.corruption);
  if (p.continuation !== undefined) out.push("--continuation", p.continuation);
  if (p.corruptedRequests != null) out.push("--corrupted-requests", String(p.corruptedRequests));
  if (p.loadMs) out.push("--load-ms", String(Math.round(p.loadMs)));
  return out;
}

/** Runs the fake until SIGTERM or SIGINT; the parent waits for the JSON ready line before using the ports. */
export async function runFakeInferenceCli(argv: string[]): Promise<void> {
  let fake: FakeInference;
  try {
    fake = await startFakeInference({
      ...parseFakeInferenceArgs(argv),
      // A request that kills the engine kills the process: no clean close, the kernel drops the sockets.
      onQueryOfDeath: () => {
        process.stderr.write(`fake-inference: query of death (${QUERY_OF_DEATH_MARKER} in a prompt): exiting ${QUERY_OF_DEATH_EXIT_CODE}\n`);
        process.exit(QUERY_OF_DEATH_EXIT_CODE);
      },
    });
  } catch (err) {
    process.stderr.write(`fake-inference: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  }
  process.stdout.write(`${JSON.stringify({ ready: true, port: fake.port, adminPort: fake.adminPort })}\n`);
  const stop = (): void => {
    void fake.close().then(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}
