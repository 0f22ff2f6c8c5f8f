/**
 * The engines the drill runs: redis-server, haproxy, pdns_server with the bind backend,
 * kcat (librdkafka's mock Kafka cluster, for the L4 queue) and python3 (the same cluster hosted
 * with its mock API, to fail one broker: `kafka-mock-host.py`).
 * Missing ones are installed by `scripts/system-deps.sh` when we are root; otherwise the
 * caller prints one line naming the `apt-get install` to run.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

export class SystemDepsError extends Error {
  constructor(readonly missing: string[]) {
    super(`missing system packages; run: sudo apt-get install -y ${missing.join(" ")}`);
    this.name = "SystemDepsError";
  }
}

/** Where Debian and Ubuntu put PowerDNS backends. */
const PDNS_LIB_DIRS = ["/usr/lib/x86_64-linux-gnu/pdns", "/usr/lib/aarch64-linux-gnu/pdns", "/usr/lib/pdns", "/usr/lib64/pdns"];

function onPath(bin: string): boolean {
  return !spawnSync(bin, ["--version"], { stdio: "ignore", timeout: 5000 }).error;
}

function bindBackendPresent(dirs: readonly string[]): boolean {
  if (dirs.some((d) => existsSync(join(d, "libbindbackend.so")))) return true;
  // Other multiarch triplets.
  try {
    return readdirSync("/usr/lib").some((d) => existsSync(join("/usr/lib", d, "pdns", "libbindbackend.so")));
  } catch {
    return false;
  }
}

export interface DepsProbe {
  onPath(bin: string): boolean;
  bindBackend(): boolean;
}

const REAL_PROBE: DepsProbe = { onPath, bindBackend: () => bindBackendPresent(PDNS_LIB_DIRS) };

/** Debian package names of what is missing; empty when everything is there. */
export function missingSystemPackages(probe: DepsProbe = REAL_PROBE): string[] {
  const missing: string[] = [];
  if (!probe.onPath(process.env.LLMHA_REDIS_SERVER ?? "redis-server")) missing.push("redis-server");
  if (!probe.onPath(process.env.LLMHA_HAPROXY ?? "haproxy")) missing.push("haproxy");
  if (!probe.onPath(process.env.LLMHA_PDNS_SERVER ?? "pdns_server")) missing.push("pdns-server");
  if (!probe.bindBackend()) missing.push("pdns-backend-bind");
  if (!probe.onPath(process.env.LLMHA_KCAT ?? "kcat")) missing.push("kcat");
  if (!probe.onPath(process.env.LLMHA_PYTHON3 ?? "python3")) missing.push("python3");
  return missing;
}

/**
 * Makes sure the drill's engines are installed: as root runs `scripts/system-deps.sh`
 * (apt-get), then checks again. Throws `SystemDepsError` naming what is still missing.
 */
export function ensureSystemDeps(opts: { repoRoot: string; probe?: DepsProbe; isRoot?: boolean } ): void {
  const probe = opts.probe ?? REAL_PROBE;
  let missing = missingSystemPackages(probe);
  if (missing.length === 0) return;
  const root = opts.isRoot ?? process.getuid?.() === 0;
  if (root) {
    spawnSync("bash", [join(opts.repoRoot, "scripts", "system-deps.sh")], { stdio: ["ignore", "inherit", "inherit"], timeout: 600_000 });
    missing = missingSystemPackages(probe);
    if (missing.length === 0) return;
  }
  throw new SystemDepsError(missing);
}
