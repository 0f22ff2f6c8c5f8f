/**
 * The Redis component on its own, in a stack named like no committed one: every ElastiCache
 * user and group id carries the stack's name (ids are unique per account and region), the user
 * names stay the roles', and a role-password map that leaves a workload role out, or gives it
 * a blank password, is refused naming the roles.
 */
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { WORKLOAD_ROLE_NAMES } from "../../contracts/redis-roles";

type Captured = { type: string; name: string; inputs: Record<string, unknown> };
const captured: Captured[] = [];
let mod: typeof import("../../infra/redis");

beforeAll(async () => {
  await pulumi.runtime.setMocks(
    {
      newResource: (a) => {
        captured.push({ type: a.type, name: a.name, inputs: a.inputs as Record<string, unknown> });
        return { id: `${a.name}-id`, state: { ...a.inputs, arn: `arn:aws:x:us-east-1:123456789012:${a.name}`, name: a.inputs.name ?? a.name, primaryEndpointAddress: "master.example" } };
      },
      call: () => ({}),
    },
    "llm-ha",
    "QA_east.2",
    false,
  );
  mod = await import("../../infra/redis.js");
});

const passwords = () => Object.fromEntries(WORKLOAD_ROLE_NAMES.map((r) => [r, `pw-${r}-0123456789abcdef`]));
const args = (rolePasswords: Record<string, string>) => ({
  vpcId: "vpc-1",
  subnetIds: ["subnet-a", "subnet-b", "subnet-c"],
  clientSecurityGroupIds: { l1: "sg-1" },
  rolePasswords,
  azs: ["us-east-1a", "us-east-1b"],
});

describe("Redis ids scoped to the stack", () => {
  it("prefixes every user and group id with the stack's name; user names are the roles'; one node per AZ in turn", async () => {
    const r = new mod.Redis("redis", args(passwords()));
    await new Promise((ok) => r.replicationGroup!.urn.apply(ok));
    await new Promise((ok) => setTimeout(ok, 50));
    const users = captured.filter((c) => c.type === "aws:elasticache/user:User");
    expect(users.map((u) => u.inputs.userName).sort()).toEqual(["default", ...WORKLOAD_ROLE_NAMES].sort());
    for (const u of users) expect(u.inputs.userId).toMatch(/^qa-east-2-redis-/);
    const group = captured.find((c) => c.type === "aws:elasticache/userGroup:UserGroup")!;
    expect(group.inputs.userGroupId).toBe("qa-east-2-redis-llmha");
    const rg = captured.find((c) => c.type === "aws:elasticache/replicationGroup:ReplicationGroup")!;
    expect(rg.inputs.preferredCacheClusterAzs).toEqual(["us-east-1a", "us-east-1b", "us-east-1a"]);
  });

  it("keeps ids valid for ElastiCache: a letter first, [a-z0-9-], at most 40 characters, distinct for long stack names", () => {
    const long = mod.stackScopedId("production-us-east-1-blue-green-canary", "redis", "llmha-agent-leader");
    const other = mod.stackScopedId("production-us-east-1-blue-green-canarz", "redis", "llmha-agent-leader");
    for (const id of [long, other, mod.stackScopedId("9lives", "redis", "default-off"), mod.stackScopedId("prod", "redis", "llmha")]) {
      expect(id).toMatch(/^[a-z][a-z0-9-]*[a-z0-9]$/);
      expect(id.length).toBeLessThanOrEqual(40);
      expect(id).not.toMatch(/--/);
    }
    expect(long).not.toBe(other);
    expect(long).toMatch(/^producti-[0-9a-f]{6}-redis-llmha-agent-leader$/);
    expect(mod.stackScopedId("prod", "redis", "llmha-agent")).toBe("prod-redis-llmha-agent");
  });

  it("refuses a partly set role-password map, naming the missing roles, and a blank password", () => {
    const partial = passwords();
    delete partial["llmha-edge"];
    delete partial["llmha-reader"];
    expect(() => new mod.Redis("partial", args(partial))).toThrow(/rolePasswords: has no password for llmha-edge, llmha-reader/);
    expect(() => new mod.Redis("blank", args({ ...passwords(), "llmha-fallback": "" }))).toThrow(/rolePasswords: has no password for llmha-fallback/);
  });
});
