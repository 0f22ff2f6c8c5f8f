import { defineConfig } from "vitest/config";
import { SlowestReporter } from "./test/support/slowest-reporter";

// Two tiers (docs/testing.md). A file's tier is in its name:
//
// - `*.test.ts`: unit and contract tests, with real engines where a contract needs them (a
//   redis-server, an HAProxy, the kcat broker), and the stack tests (below). `npm test`: about
//   six minutes on 2 cores.
// - `*.e2e.test.ts`: the drill-scale suites. They run simulated nodes (each an agent, a fake
//   nvidia-smi and a fake inference server as processes), wait for real failovers and crash
//   recoveries, or run the bench and the drill. `npm run test:e2e`.
//
// The two suites that run the whole drill (the quick drill, a chaos minute) start dozens of
// processes each. Beside other suites they took about twice their own time, and runs with them
// there failed on starvation (a standby that did not serve within the quick drill, an agent with
// no /livez in 45 s in CI), so they run last, one at a time, when nothing else runs.
const WHOLE_DRILL = ["test/drill/quick.e2e.test.ts", "test/drill/chaos.e2e.test.ts", "test/gameday/local.e2e.test.ts"];

// Unit files run three at a time on the 2-core machines: most wait on engines (Redis, HAProxy),
// so a third worker uses the idle time (the tier took 275 s with two, 235 s with three; four
// overloaded the cores and a timing test failed). `LLMHA_TEST_WORKERS` overrides. The e2e files
// run many processes each: two at a time. Each test gets a generous timeout.
// The stack tests (`npm test` runs them beside the unit project) capture the Pulumi program under mocks and
// check the graph: no server, no timer, no module mock, nothing left behind. Each file imported @pulumi/aws
// and the program afresh (about 2 s of the 67 files' 150 s of imports); sharing a worker's modules between
// them (`isolate: false`) took the 67 files from 187 s to 128 s. A capture resets Pulumi's runtime state
// itself (captureStackGraph: setMocks, setAllConfig, disconnect), so one file's stack never reaches the next.
const SHARED_MODULES = ["test/infra/**/*.test.ts", "test/policies/**/*.test.ts"];
const unitFiles = { maxWorkers: Number(process.env.LLMHA_TEST_WORKERS ?? 3), fileParallelism: true } as const;
const e2eFiles = { maxWorkers: 2, fileParallelism: true } as const;

export default defineConfig({
  test: {
    // Installs the engines and the alert tooling when missing (as root), else names them.
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // The ten slowest files after every run: a file that grows slow is seen the day it does.
    reporters: ["default", new SlowestReporter()],
    projects: [
      { extends: true, test: { name: "unit", include: ["test/**/*.test.ts"], exclude: ["test/**/*.e2e.test.ts", ...SHARED_MODULES], ...unitFiles, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: "stacks", include: SHARED_MODULES, isolate: false, ...unitFiles, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: "e2e", include: ["test/**/*.e2e.test.ts"], exclude: WHOLE_DRILL, ...e2eFiles, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: "whole-drill", include: WHOLE_DRILL, maxWorkers: 1, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
});
