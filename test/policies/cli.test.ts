import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { policies } from "../../policies/all";
import { PENDING_ADVISORY } from "./fixtures";

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, "..", "..");
const TSX = path.join(ROOT, "node_modules", ".bin", "tsx");

async function policyCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(TSX, ["policies/cli.ts", ...args], { cwd: ROOT });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe("npm run policy", () => {
  it("prints mandatory violations as a table and exits 1", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "policy-cli-")), "config.json");
    fs.writeFileSync(file, JSON.stringify({ "failover-record-ttl": { maxTtl: 10 }, "required-tags": "disabled" }));
    const { code, stdout } = await policyCli(["--stack", "dev", "--policy-pack-config", file]);
    expect(code).toBe(1);
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^POLICY\s+LEVEL\s+RESOURCE\s+MESSAGE$/);
    expect(lines[1]).toMatch(/^failover-record-ttl\s+mandatory\s+Record dns-\S+\s+Failover record dns-\S+ has ttl \d+; it must be at most 10\.$/);
    expect(lines[lines.length - 1]).toMatch(new RegExp(`^dev: \\d+ resources, ${policies.length} policies, [1-9]\\d* mandatory and ${PENDING_ADVISORY} advisory violations$`));
  });

  it("exits 0 on a clean stack", async () => {
    const { code, stdout } = await policyCli(["--stack", "prod"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(new RegExp(`prod: \\d+ resources, ${policies.length} policies, 0 mandatory and ${PENDING_ADVISORY} advisory violations`));
  });

  it("exits 2 with the usage on an unknown stack", async () => {
    const { code, stderr } = await policyCli(["--stack", "qa"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--stack must be one of dev, staging, prod or a path to a Pulumi.<stack>.yaml (got qa)");
  });

  it("exits 2, naming the file and the line, for a stack file that does not parse (not 1: that means violations)", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "policy-cli-")), "Pulumi.broken.yaml");
    fs.writeFileSync(file, "config:\n  llm-ha:region: us-east-1\n  llm-ha:azs: [a, b\n  aws:region: us-east-1\n");
    const { code, stderr } = await policyCli(["--stack", file]);
    expect(code).toBe(2);
    expect(stderr).toContain(file);
    expect(stderr).toMatch(/line \d+/);
  });

  it("exits 2 for stack settings the program refuses", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "policy-cli-"));
    const file = path.join(dir, "Pulumi.dev.yaml");
    const dev = fs.readFileSync(path.join(ROOT, "Pulumi.dev.yaml"), "utf8");
    fs.writeFileSync(file, dev.replace("llm-ha:standbyAz: us-east-1b", "llm-ha:standbyAz: us-east-1z"));
    const { code, stderr } = await policyCli(["--stack", file]);
    expect(code, stderr).toBe(2);
    expect(stderr).toContain("Pulumi.dev.yaml");
  });
});
