/**
 * `npm run policy` (policies/cli.ts's entry function, in this process: the process boundary of
 * bin/llm-ha's scripts is test/cli/commands.test.ts's): argv in, exit code, table or JSON out.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { main } from "../../policies/cli";
import { PENDING_ADVISORY } from "./fixtures";
import { stackStandIns } from "../../infra/capture";
import { runInProcess, type Ran } from "../support/in-process";
import { testTempDir } from "../support/temp-dir";

const ROOT = path.resolve(__dirname, "..", "..");

function policyCli(args: string[]): Promise<Ran> {
  return runInProcess(main, args, { cwd: ROOT });
}

describe("npm run policy", () => {
  it("prints mandatory violations as a table and exits 1", async () => {
    const file = path.join(testTempDir("policy-cli-"), "config.json");
    fs.writeFileSync(file, JSON.stringify({ "failover-record-ttl": { maxTtl: 10 }, "required-tags": "disabled" }));
    const { code, stdout } = await policyCli(["--stack", "dev", "--policy-pack-config", file]);
    expect(code).toBe(1);
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^POLICY\s+LEVEL\s+RESOURCE\s+MESSAGE$/);
    expect(lines[1]).toMatch(/^failover-record-ttl\s+mandatory\s+Record dns-\S+\s+Weighted record dns-\S+ has ttl \d+; it must be at most 10\.$/);
    // required-tags is disabled by the config: not run, not counted.
    expect(lines[lines.length - 1]).toMatch(new RegExp(`^dev: \\d+ resources, ${policies.length - 1} policies, [1-9]\\d* mandatory and ${PENDING_ADVISORY} advisory violations \\(\\d+ settings were stand-ins\\)$`));
    expect(stdout).toMatch(new RegExp(`^policies run \\(${policies.length - 1}\\): `, "m"));
    expect(stdout).not.toMatch(/policies run[^]*required-tags[^]*stand-ins/);
  });

  it("exits 0 on a clean stack", async () => {
    const { code, stdout } = await policyCli(["--stack", "prod"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(new RegExp(`prod: \\d+ resources, ${policies.length} policies, 0 mandatory and ${PENDING_ADVISORY} advisory violations`));
  });

  it("lists the policies it ran and the settings it filled with stand-ins; -o json carries both", async () => {
    const { code, stdout } = await policyCli(["--stack", "prod", "-o", "json"]);
    expect(code).toBe(0);
    const doc = JSON.parse(stdout) as { version: number; policies: string[]; standIns: string[]; violations: unknown[] };
    expect(doc.version).toBe(1);
    expect(doc.policies).toEqual(policies.map((p) => p.name));
    // The settings only a user gives, which Pulumi.prod.yaml leaves out on purpose.
    expect(doc.standIns).toEqual(expect.arrayContaining(["llm-ha:redisRolePasswords", "llm-ha:dns.zoneId", "llm-ha:dns.serviceName"]));
    const text = await policyCli(["--stack", "prod"]);
    expect(text.stdout).toContain(`policies run (${policies.length}): ${policies[0].name}, ${policies[1].name}`);
    expect(text.stdout).toContain(`stand-ins (${doc.standIns.length}): llm-ha:redisRolePasswords, llm-ha:dns.zoneId`);
    expect(text.stdout).toContain("Pulumi.prod.yaml leaves these out; this offline run filled them with placeholders");
    expect(text.stdout).toContain(`(${doc.standIns.length} settings were stand-ins)`);
  }, 180_000);

  it("a setting the stack file gives is not a stand-in", () => {
    const dir = testTempDir("policy-cli-");
    const file = path.join(dir, "Pulumi.prod.yaml");
    const prod = fs.readFileSync(path.join(ROOT, "Pulumi.prod.yaml"), "utf8");
    // Prod takes no hub token (its weights come from S3): the agent image stands for any user setting.
    expect(stackStandIns("prod")).toContain("llm-ha:agentImage");
    fs.writeFileSync(file, prod.replace(/^config:\n/m, `config:\n  llm-ha:agentImage: 111122223333.dkr.ecr.us-east-1.amazonaws.com/mine/agent@sha256:${"ab".repeat(32)}\n`));
    expect(stackStandIns("prod", file)).not.toContain("llm-ha:agentImage");
    expect(stackStandIns("prod", file).length).toBe(stackStandIns("prod").length - 1);
  });

  it("--help prints the usage on stdout and exits 0", async () => {
    const { code, stdout } = await policyCli(["--help"]);
    expect(code).toBe(0);
    expect(stdout).toContain("Usage: llm-ha policy --stack");
  });

  it("exits 2 with the usage on an unknown stack", async () => {
    const { code, stderr } = await policyCli(["--stack", "qa"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--stack must be one of dev, staging, prod, byo or a path to a Pulumi.<stack>.yaml (got qa)");
  });

  it("exits 2, naming the file and the line, for a stack file that does not parse (not 1: that means violations)", async () => {
    const file = path.join(testTempDir("policy-cli-"), "Pulumi.broken.yaml");
    fs.writeFileSync(file, "config:\n  llm-ha:region: us-east-1\n  llm-ha:azs: [a, b\n  aws:region: us-east-1\n");
    const { code, stderr } = await policyCli(["--stack", file]);
    expect(code).toBe(2);
    expect(stderr).toContain(file);
    expect(stderr).toMatch(/line \d+/);
  });

  it("exits 2 for stack settings the program refuses", async () => {
    const dir = testTempDir("policy-cli-");
    const file = path.join(dir, "Pulumi.dev.yaml");
    const dev = fs.readFileSync(path.join(ROOT, "Pulumi.dev.yaml"), "utf8");
    fs.writeFileSync(file, dev.replace("llm-ha:standbyAz: us-east-1b", "llm-ha:standbyAz: us-east-1z"));
    const { code, stderr } = await policyCli(["--stack", file]);
    expect(code, stderr).toBe(2);
    expect(stderr).toContain("Pulumi.dev.yaml");
  });
});
