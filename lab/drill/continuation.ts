/**
 * The drill's continuation relays: one `llm-ha continue` process beside each AZ's HAProxy, on
 * the AZ proxy's address, as the L1 pod runs it (its own process from the same image's CLI):
 * HAProxy's SOCKS4 hop to the AZ's servers, its connections to them leaving from that address.
 */
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { join } from "node:path";
import type { HaproxyContinuation } from "../../contracts/haproxy-config";
import { freePort, waitFor } from "../../agent/src/util/net";
import { stopChild } from "../engines/child";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");

export interface DrillRelay {
  /** What the AZ proxy's config names. */
  config: HaproxyContinuation;
  metricsUrl: string;
  stop(): Promise<void>;
}

/** What the AZ proxy on `address` names for its relay. */
export function drillRelayConfig(address: string, ports: { relay: number; upstream: number }): HaproxyContinuation {
  return { relay: `${address}:${ports.relay}`, bind: `${address}:${ports.upstream}` };
}

/** Starts the relay of the AZ proxy on `address`; resolves once its metrics listener answers. */
export async function startDrillRelay(address: string, ports: { relay: number; upstream: number }, dir: string, name: string, track: (stop: () => Promise<void>) => void): Promise<DrillRelay> {
  const metricsPort = await freePort();
  const env = {
    ...process.env,
    LLMHA_CONTINUE_HOST: address,
    LLMHA_CONTINUE_PORT: String(ports.relay),
    LLMHA_CONTINUE_UPSTREAM: `${address}:${ports.upstream}`,
    // As the AZ proxy's own connections (`source` in its config): a cut of the links between AZs
    // (cross-az-loss) tells this AZ's connections to the servers apart by their address.
    LLMHA_CONTINUE_SOURCE: address,
    LLMHA_CONTINUE_KIND: "vllm",
    // The drill's servers stream a chunk every few tens of ms: a second without one is a dead server.
    LLMHA_CONTINUE_STALL_MS: "3000",
    LLMHA_CONTINUE_METRICS_ADDR: `${address}:${metricsPort}`,
  };
  const log = createWriteStream(join(dir, `continue-${name}.log`), { flags: "a" });
  const child = spawn(process.execPath, ["--import", "tsx", CLI, "continue"], { env, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  let gone = false;
  child.once("exit", () => (gone = true));
  const stop = async (): Promise<void> => {
    await stopChild(child);
    log.end();
  };
  // Tracked before it is up: a start that times out leaves nothing running.
  track(stop);
  const metricsUrl = `http://${address}:${metricsPort}/metrics`;
  await waitFor(
    `llm-ha continue of ${name}`,
    async () => {
      if (gone) throw new Error(`llm-ha continue of ${name} exited at start-up (see ${dir}/continue-${name}.log)`);
      return (await fetch(metricsUrl, { signal: AbortSignal.timeout(500) }).catch(() => null))?.ok === true;
    },
    // A tsx start beside the drill's other processes on a loaded 2-core host took over a minute.
    { timeoutMs: 180_000, everyMs: 100 },
  );
  return {
    config: drillRelayConfig(address, ports),
    metricsUrl,
    stop,
  };
}
