import { defineConfig } from "vitest/config";

// Suites start real redis-server, HAProxy and PowerDNS processes on loopback; on a
// 2-core machine running them all at once makes timing figures noisy, so files run
// two at a time and each test gets a generous timeout.
//
// The two suites that run the whole drill (the quick drill, a chaos minute) start dozens of
// processes each. Beside the other suites they took about twice their own time, and runs with
// them there failed on starvation: a standby that did not serve within the quick drill here, an
// agent with no /livez in 45 s in CI. They run last, one at a time, when nothing else runs.
const WHOLE_DRILL = ["test/drill/quick.test.ts", "test/drill/chaos.test.ts"];

export default defineConfig({
  test: {
    // Installs the engines and the alert tooling when missing (as root), else names them.
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: ["default"],
    projects: [
      { extends: true, test: { name: "suites", include: ["test/**/*.test.ts"], exclude: WHOLE_DRILL, maxWorkers: 2, fileParallelism: true, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: "whole-drill", include: WHOLE_DRILL, maxWorkers: 1, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
});
