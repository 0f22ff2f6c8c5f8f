/**
 * Before any suite: the engines the tests start (redis-server, HAProxy, PowerDNS, kcat) and the
 * alert tooling (promtool, Prometheus, amtool) are installed by the project's own script when
 * missing and we are root; otherwise it names the one apt-get line to run. A test skipped for a
 * missing tool would hide a gap.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";

export function setup(): void {
  const r = spawnSync("bash", [join(__dirname, "..", "scripts", "system-deps.sh")], { stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, LLMHA_WITH_PROMTOOL: "1" }, timeout: 600_000 });
  if (r.status !== 0) process.stderr.write("llm-ha tests: some system packages are missing (see the line above); the suites that need them will fail or skip\n");
}
