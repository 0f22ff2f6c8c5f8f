/**
 * A real HAProxy on loopback, configured by the one generator (`l1/haproxy-config.ts`),
 * for the tests, the drill and the bench. State is read from the admin stats socket.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderHaproxyConfig, type HaproxyConfigArgs } from "../../contracts/haproxy-config";
import { sleep, socketExchange } from "../../agent/src/util/net";
import { EngineMissingError, stopChild } from "./child";

export class HaproxyMissingError extends EngineMissingError {
  constructor(bin: string) {
    super(bin, "haproxy");
    this.name = "HaproxyMissingError";
  }
}

export class HaproxyStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HaproxyStartError";
  }
}

/** One row of `show stat`, the fields llm-ha reads. */
export interface HaproxyServerStat {
  proxy: string;
  server: string;
  /** `UP`, `DOWN`, `DRAIN`, `MAINT`, `UP 1/2`, `no check`... */
  status: string;
  /** Effective weight now. */
  weight: number;
  /** Requests sent to this server so far. */
  total: number;
  /** Last agent-check reply as HAProxy understood it (`agent_desc`). */
  agentDesc: string;
  checkDesc: string;
  /** `address:port` the server points at (a `server-template` slot: what DNS gave it); "" when none. */
  addr: string;
}

export interface HaproxyHandle {
  readonly pid: number;
  readonly configPath: string;
  readonly statsSocket: string;
  /** The `level user` socket `llm-ha edge-sync` uses (map changes only); "" for a configuration of the caller's. */
  readonly mapSocket: string;
  /** Server rows of `show stat` (frontends and backend totals left out). */
  stats(): Promise<HaproxyServerStat[]>;
  /** Any admin socket command, e.g. `show servers state`. */
  command(cmd: string): Promise<string>;
  /** SIGTERM (then SIGKILL) and remove the temporary folder. Idempotent. */
  stop(): Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

export function haproxyBinary(): string {
  return process.env.LLMHA_HAPROXY ?? "haproxy";
}

/** `haproxy -c`: validates a configuration with the real binary. Returns the output; throws when invalid. */
export function checkHaproxyConfig(text: string, bin = haproxyBinary()): string {
  const dir = mkdtempSync(join(tmpdir(), "llmha-haproxy-check-"));
  try {
    const cfg = join(dir, "haproxy.cfg");
    // A map the configuration loads from a path of the target machine (the L1 pod's
    // /var/run/llm-ha-edge/keys.map) is checked with an empty one of the same name here.
    let n = 0;
    const local = text.replace(/map\((\/[^)\s]+)\)/g, (_m, p: string) => {
      if (existsSync(p)) return `map(${p})`;
      const stand = join(dir, `map-${n++}.map`);
      writeFileSync(stand, "");
      return `map(${stand})`;
    });
    writeFileSync(cfg, local);
    const r = spawnSync(bin, ["-c", "-f", cfg], { encoding: "utf8" });
    if (r.error) throw new HaproxyMissingError(bin);
    const out = `${r.stdout}${r.stderr}`;
    if (r.status !== 0) throw new HaproxyStartError(`haproxy -c refused the configuration:\n${out}`);
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function socketCommand(path: string, cmd: string, timeoutMs = 2000): Promise<string> {
  return socketExchange({ path }, cmd + "\n", timeoutMs, `stats socket ${path} (${JSON.stringify(cmd)})`);
}

/** Parses `show stat` CSV into server rows. */
export function parseShowStat(csv: string): HaproxyServerStat[] {
  const lines = csv.split("\n").filter((l) => l.trim() !== "");
  if (!lines[0]?.startsWith("# ")) return [];
  const head = lines[0].slice(2).split(",");
  const col = (name: string): number => head.indexOf(name);
  const [px, sv, st, w, tot, ad, cd, addr] = ["pxname", "svname", "status", "weight", "stot", "agent_desc", "check_desc", "addr"].map(col);
  return lines
    .slice(1)
    .map((l) => l.split(","))
    .filter((c) => c[sv] !== "FRONTEND" && c[sv] !== "BACKEND")
    .map((c) => ({
      proxy: c[px],
      server: c[sv],
      status: c[st],
      weight: Number(c[w] || 0),
      total: Number(c[tot] || 0),
      agentDesc: c[ad] ?? "",
      checkDesc: c[cd] ?? "",
      addr: addr >= 0 ? (c[addr] ?? "") : "",
    }));
}

export interface HaproxyStartOptions {
  bin?: string;
  startTimeoutMs?: number;
  /** Environment variables added to the process's (the configuration may name them, e.g. the servers' API key). */
  env?: Record<string, string>;
}

/** Starts HAProxy in the foreground with a generated configuration; waits for its stats socket. */
export function startHaproxy(args: Omit<HaproxyConfigArgs, "statsSocket" | "mapSocket">, opts: HaproxyStartOptions = {}): Promise<HaproxyHandle> {
  return startHaproxyWith((statsSocket, mapSocket) => renderHaproxyConfig({ ...args, statsSocket, mapSocket }), opts);
}

/**
 * Starts HAProxy with a configuration of the caller's (e.g. the drill's TCP endpoint in front
 * of Redis); `render` gets the stats socket path its `global` section must declare, and a path
 * for the `level user` map socket it may declare too (the handle's `mapSocket` when it does).
 */
export async function startHaproxyWith(render: (statsSocket: string, mapSocket: string) => string, opts: HaproxyStartOptions = {}): Promise<HaproxyHandle> {
  const bin = opts.bin ?? haproxyBinary();
  const dir = mkdtempSync(join(tmpdir(), "llmha-haproxy-"));
  const statsSocket = join(dir, "admin.sock");
  const mapPath = join(dir, "map.sock");
  const configPath = join(dir, "haproxy.cfg");
  const text = render(statsSocket, mapPath);
  const mapSocket = text.includes(`stats socket ${mapPath} `) ? mapPath : "";
  writeFileSync(configPath, text);
  let child: ChildProcess;
  let stderr = "";
  let exited = false;
  try {
    child = spawn(bin, ["-f", configPath, "-db"], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...opts.env } });
  } catch {
    throw new HaproxyMissingError(bin);
  }
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    if (stderr.length < 20_000) stderr += d;
  });
  const spawnFailed = new Promise<never>((_, reject) =>
    child.once("error", (e: NodeJS.ErrnoException) => reject(e.code === "ENOENT" ? new HaproxyMissingError(bin) : e)),
  );
  child.once("exit", () => (exited = true));
  // Milliseconds when quiet; a loaded machine (tsx processes starting beside it) took over 10 s.
  const deadline = Date.now() + (opts.startTimeoutMs ?? 30_000);
  const ready = (async (): Promise<void> => {
    for (;;) {
      if (exited) throw new HaproxyStartError(`haproxy exited at start-up:\n${stderr}`);
      try {
        await socketCommand(statsSocket, "show info", 500);
        return;
      } catch {
        if (Date.now() > deadline) throw new HaproxyStartError(`haproxy did not open its stats socket:\n${stderr}`);
        await sleep(25);
      }
    }
  })();
  try {
    await Promise.race([ready, spawnFailed]);
  } catch (e) {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  let stopped: Promise<void> | null = null;
  return {
    pid: child.pid ?? -1,
    configPath,
    statsSocket,
    mapSocket,
    stats: async () => parseShowStat(await socketCommand(statsSocket, "show stat")),
    command: (cmd) => socketCommand(statsSocket, cmd),
    kill: (signal) => {
      if (!exited) child.kill(signal);
    },
    stop: () =>
      (stopped ??= (async () => {
        if (!exited) await stopChild(child);
        rmSync(dir, { recursive: true, force: true });
      })()),
  };
}
