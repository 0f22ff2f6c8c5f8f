/**
 * The one-way boundaries of docs/architecture.md are lint errors: `npm run lint` (ESLint with the
 * repository's own eslint.config.mjs) must refuse a wrong-way import, static or dynamic,
 * and an import circle — and accept the allowed directions.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { ESLint } from "eslint";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..");
const eslint = new ESLint({ cwd: ROOT });

/** The rule ids ESLint reports for `code` as if it were the file `file` (repository-relative). */
async function ruleIds(file: string, code: string): Promise<string[]> {
  const [r] = await eslint.lintText(code, { filePath: join(ROOT, file) });
  return r.messages.map((m) => m.ruleId ?? m.message);
}

describe("import boundaries (npm run lint)", () => {
  const wrong: [string, string, string][] = [
    ["the image's runtime reaching into infra", "agent/src/probe.ts", 'import { resolveConfig } from "../../infra/config";\nexport const x = resolveConfig;\n'],
    ["the runtime loading the lab dynamically", "agent/src/probe.ts", 'export const x = () => import("../../lab/drill/command.js");\n'],
    ["the runtime importing a test helper", "agent/src/fleet/controller/probe.ts", 'import { testLogger } from "../../../../test/redis/helpers";\nexport const x = testLogger;\n'],
    ["infra importing the agent's runtime", "infra/probe.ts", 'import { evaluate } from "../agent/src/node/evaluator/evaluate";\nexport const x = evaluate;\n'],
    ["a policy importing a test", "policies/probe.ts", 'import { PROJECT } from "../test/infra/stack-yaml";\nexport const x = PROJECT;\n'],
    ["contracts importing the runtime", "contracts/probe.ts", 'import { evaluate } from "../agent/src/node/evaluator/evaluate";\nexport const x = evaluate;\n'],
    // Inside the runtime, the folders say where each part runs.
    ["a GPU node's part importing the actuators", "agent/src/node/sources/probe.ts", 'import { FencedActuator } from "../../fleet/actuators/gate";\nexport const x = FencedActuator;\n'],
    ["a GPU node's part importing an operator command", "agent/src/node/probe.ts", 'import { STATUS_USAGE } from "../ops/status/command";\nexport const x = STATUS_USAGE;\n'],
    ["the edge importing the controller", "agent/src/edge/fallback/probe.ts", 'import { Controller } from "../../fleet/controller/controller";\nexport const x = Controller;\n'],
    ["the fleet importing the edge", "agent/src/fleet/redis/probe.ts", 'import { KeyStore } from "../../edge/keys/keys";\nexport const x = KeyStore;\n'],
    ["the runtime's leaf importing a part", "agent/src/util/probe.ts", 'import { RedisKeys } from "../fleet/redis/keys";\nexport const x = RedisKeys;\n'],
    ["the lab importing a test", "lab/probe.ts", 'import { testLogger } from "../test/redis/helpers";\nexport const x = testLogger;\n'],
  ];
  for (const [what, file, code] of wrong) {
    it(`refuses ${what}`, async () => {
      expect(await ruleIds(file, code)).toContain("import-x/no-restricted-paths");
    });
  }

  it("accepts the allowed directions", async () => {
    expect(await ruleIds("agent/src/probe.ts", 'import { PORTS } from "../../contracts/names";\nexport const x = PORTS;\n')).toEqual([]);
    expect(await ruleIds("infra/probe.ts", 'import { renderHaproxyConfig } from "../contracts/haproxy-config";\nexport const x = renderHaproxyConfig;\n')).toEqual([]);
    expect(await ruleIds("agent/src/node/reporters/probe.ts", 'import { RedisKeys } from "../../fleet/redis/keys";\nexport const x = RedisKeys;\n')).toEqual([]);
    expect(await ruleIds("agent/src/ops/probe.ts", 'import { Controller } from "../fleet/controller/controller";\nexport const x = Controller;\n')).toEqual([]);
    expect(await ruleIds("lab/probe.ts", 'import { evaluate } from "../agent/src/node/evaluator/evaluate";\nexport const x = evaluate;\n')).toEqual([]);
    expect(await ruleIds("policies/cli-probe.ts", 'import { captureStack } from "../infra/capture";\nexport const x = captureStack;\n')).toEqual([]);
  });

  describe("circles", () => {
    const dir = mkdtempSync(join(ROOT, "infra", ".lint-probe-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    it("refuses an import circle", async () => {
      writeFileSync(join(dir, "a.ts"), 'import { b } from "./b";\nexport const a = (): unknown => b;\n');
      writeFileSync(join(dir, "b.ts"), 'import { a } from "./a";\nexport const b = (): unknown => a;\n');
      const results = await eslint.lintFiles([relative(ROOT, join(dir, "a.ts"))]);
      expect(results[0].messages.map((m) => m.ruleId)).toContain("import-x/no-cycle");
    });
  });
});
