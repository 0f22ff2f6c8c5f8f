/**
 * `llm-ha gameday --stack ENV --dry-run`: the plan from the stack file alone — every template
 * with its blast radius held to the stack's tags or ARNs, its stop alarm and what it means, its
 * role — the same templates the program makes; a stack that leaves the game day off gets the plan
 * once on, said so; bad input (a scenario, a region without Route53's metrics, no --dry-run)
 * exits 2 naming the thing.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GAMEDAY_SCENARIOS } from "../../contracts/gameday";
import { gamedayCommand, type GamedayPlan } from "../../infra/gameday/command";
import { testTempDir } from "../support/temp-dir";

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const o = vi.spyOn(process.stdout, "write").mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, "write").mockImplementation((s) => ((err += String(s)), true));
  try {
    const code = await gamedayCommand(argv);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

afterEach(() => vi.restoreAllMocks());

describe("llm-ha gameday --dry-run", () => {
  it("prod: every template with its blast radius, stop alarm and role; the stack's game day off, said so", async () => {
    const r = await run(["--stack", "prod", "--dry-run", "--json"]);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.out) as GamedayPlan;
    expect(plan).toMatchObject({ stack: "prod", cluster: "llm-ha-prod", region: "us-east-1", enabled: false, activeAzs: ["us-east-1a", "us-east-1b"], standbyAz: "us-east-1c", durationMinutes: 10, log: "/aws/fis/llm-ha-prod" });
    expect(plan.templates.map((t) => t.scenario)).toEqual([...GAMEDAY_SCENARIOS]);
    for (const t of plan.templates) {
      expect(t.stop.alarm).toMatch(/^llm-ha-prod-gameday-stop-(anyActiveAz|beyondOneAz)$/);
      // Every target held to the stack: its tags, its own ARN, or (pods) its cluster.
      for (const b of t.blastRadius) expect(b).toMatch(/Environment=prod|arn:aws:ec2:.*subnet\/<the stack's private subnet|clusterIdentifier=llm-ha-prod|eks:cluster-name=llm-ha-prod/);
      expect(t.role.length).toBeGreaterThan(0);
    }
    const gpu = plan.templates.find((t) => t.scenario === "gpu-lost")!;
    expect(gpu.blastRadius[0]).toMatch(/^OneGpuInstance: COUNT\(1\) of aws:ec2:instance; tagged Project=llm-ha, Environment=prod, llm-ha\.io\/az=us-east-1a/);
    expect(gpu.stop.firesWhen).toMatch(/any active AZ fails its Route53 health check .*below 2/);
    const text = await run(["--stack", "prod", "--dry-run", "--scenario", "az-power-interruption"]);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/llm-ha:gameday is off in Pulumi\.prod\.yaml: this is the plan once it is on/);
    expect(text.out).toMatch(/blast radius: AzInstances: ALL of aws:ec2:instance; tagged Project=llm-ha, Environment=prod/);
    expect(text.out).toMatch(/stops when: {3}alarm llm-ha-prod-gameday-stop-beyondOneAz fires: more than one active AZ/);
    expect(text.out).toMatch(/aws fis start-experiment/);
    expect(text.out).not.toMatch(/^gpu-lost /m);
  });

  it("bad input exits 2 naming it: a scenario, a region without Route53's metrics", async () => {
    const bad = await run(["--stack", "prod", "--dry-run", "--scenario", "gpu-lots"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--scenario "gpu-lots": one of gpu-lost, .* \(did you mean gpu-lost\?\)/);
    const dir = testTempDir("llmha-gameday-");
    const file = join(dir, "Pulumi.eu.yaml");
    writeFileSync(file, readFileSync("Pulumi.dev.yaml", "utf8").replace("aws:region: us-east-1", "aws:region: eu-west-1").replace(/us-east-1([a-c])/g, "eu-west-1$1"));
    const eu = await run(["--stack", file, "--dry-run"]);
    expect(eu.code).toBe(2);
    expect(eu.err).toMatch(/gameday/);
    expect(eu.err).toMatch(/us-east-1/);
  });
});
