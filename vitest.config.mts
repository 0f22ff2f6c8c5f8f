import { defineConfig } from "vitest/config";

// Suites start real redis-server, HAProxy and PowerDNS processes on loopback; on a
// 2-core machine running them all at once makes timing figures noisy, so files run
// two at a time and each test gets a generous timeout.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Installs the engines and the alert tooling when missing (as root), else names them.
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: 2,
    fileParallelism: true,
    reporters: ["default"],
  },
});
