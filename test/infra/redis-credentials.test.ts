/**
 * Least privilege: every workload that reaches Redis does so with its own role's
 * user where roles are on — the L1 pod's fallback and key sync included, which used to take the
 * one superuser URL — and no container gets a password in an environment variable or a URL.
 */
import { describe, expect, it } from "vitest";
import { captureStack, TEST_REDIS_TOKEN, type CapturedResource } from "../../infra/capture";
import { WORKLOAD_ROLE_NAMES } from "../../contracts/redis-roles";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const PASSWORDS = Object.fromEntries(WORKLOAD_ROLE_NAMES.map((r, i) => [r, `pw-${r}-${"x".repeat(16)}-${i}`]));

function containers(rs: CapturedResource[]): { workload: string; c: O; volumes: O[] }[] {
  return rs
    .filter((r) => r.type === "kubernetes:apps/v1:Deployment" || r.type === "kubernetes:apps/v1:DaemonSet")
    .flatMap((r) => {
      const pod = (r.props as O).spec.template.spec;
      return [...(pod.initContainers ?? []), ...pod.containers].map((c: O) => ({ workload: (r.props as O).metadata.name as string, c, volumes: (pod.volumes ?? []) as O[] }));
    });
}

/** The Secret a container's Redis endpoint comes from, and whether its password file is mounted from that Secret. */
function redisOf(x: { c: O; volumes: O[] }): { secret: string; fileFromSameSecret: boolean } | null {
  const url = (x.c.env ?? []).find((e: O) => e.name === "LLMHA_REDIS_URL");
  if (!url) return null;
  expect(url.valueFrom?.secretKeyRef?.key, `${x.c.name}: LLMHA_REDIS_URL`).toBe("endpoint");
  const secret = url.valueFrom.secretKeyRef.name as string;
  const file = (x.c.env as O[]).find((e) => e.name === "LLMHA_REDIS_PASSWORD_FILE")?.value as string | undefined;
  const mount = (x.c.volumeMounts ?? []).find((m: O) => file?.startsWith(`${m.mountPath}/`));
  const volume = x.volumes.find((v) => v.name === mount?.name);
  return { secret, fileFromSameSecret: volume?.secret?.secretName === secret };
}

describe("each Redis client with its own credential, the password as a file", () => {
  it("roles on (prod with llm-ha:redisRolePasswords): agent, controller, fallback and key sync each their role's Secret", async () => {
    const rs = await captureStack("prod", { "llm-ha:redisRolePasswords": JSON.stringify(PASSWORDS) });
    const byContainer = new Map<string, Set<string>>();
    for (const x of containers(rs)) {
      const r = redisOf(x);
      if (!r) continue;
      expect(r.fileFromSameSecret, `${x.workload}/${x.c.name}`).toBe(true);
      byContainer.set(x.c.name, (byContainer.get(x.c.name) ?? new Set()).add(r.secret));
    }
    expect(Object.fromEntries([...byContainer].map(([k, v]) => [k, [...v]]))).toEqual({
      agent: ["llm-ha-redis-agent"],
      controller: ["llm-ha-redis-controller"],
      fallback: ["llm-ha-redis-fallback"],
      "edge-map": ["llm-ha-redis-edge"],
      "edge-sync": ["llm-ha-redis-edge"],
    });
    const secrets = rs.filter((r) => r.type === "kubernetes:core/v1:Secret").map((r) => r.props as O);
    for (const [name, user] of [["llm-ha-redis-fallback", "llmha-fallback"], ["llm-ha-redis-edge", "llmha-edge"]]) {
      const s = secrets.find((x) => x.metadata.name === name);
      expect(s?.stringData.endpoint, name).toMatch(new RegExp(`^rediss://${user}@[^:@]+:6379$`));
      expect(s?.stringData.password, name).toBe(PASSWORDS[user]);
    }
  });

  it("the break-glass user comes from its own secret, reaches no key, may end a script; no workload gets it", async () => {
    const rs = await captureStack("prod", { "llm-ha:redisRolePasswords": JSON.stringify(PASSWORDS), "llm-ha:redisBreakglassPassword": "bg-0123456789abcdef0123" });
    const users = rs.filter((r) => r.type === "aws:elasticache/user:User").map((r) => r.props as O);
    const bg = users.find((u) => u.userName === "llmha-breakglass");
    expect(bg?.passwords).toEqual(["bg-0123456789abcdef0123"]);
    expect(bg?.accessString).toMatch(/\+script\|kill/);
    expect(bg?.accessString).toMatch(/\+function\|kill/);
    expect(bg?.accessString).not.toMatch(/~/);
    // Production roles: no EVAL, no SCRIPT; FUNCTION LOAD only the controller's.
    for (const u of users.filter((x) => x.userName !== "llmha-breakglass" && x.userName !== "default")) {
      expect(u.accessString, u.userName).not.toMatch(/\+eval|\+evalsha|\+script/);
      if (!["llmha-controller", "llmha-agent-leader"].includes(u.userName)) expect(u.accessString, u.userName).not.toMatch(/function\|load/);
    }
    const secrets = rs.filter((r) => r.type === "kubernetes:core/v1:Secret").map((r) => JSON.stringify(r.props));
    for (const x of secrets) expect(x).not.toContain("bg-0123456789abcdef0123");
    // Without the secret there is no break-glass user (an older config keeps deploying).
    const without = await captureStack("prod", { "llm-ha:redisRolePasswords": JSON.stringify(PASSWORDS) });
    expect(without.filter((r) => r.type === "aws:elasticache/user:User").map((r) => (r.props as O).userName)).not.toContain("llmha-breakglass");
  });

  it("roles by default: a stack file that sets no Redis credential gets a user group, no AUTH token, and no shared Secret", async () => {
    // The offline run fills llm-ha:redisRolePasswords with stand-ins, as preflight asks the user for them.
    const rs = await captureStack("prod");
    const rg = rs.find((r) => r.type === "aws:elasticache/replicationGroup:ReplicationGroup")!.props as O;
    expect(rg.userGroupIds).toHaveLength(1);
    expect(rg.authToken).toBeUndefined();
    const users = rs.filter((r) => r.type === "aws:elasticache/user:User").map((r) => r.props as O);
    // No break-glass user without its own secret (redisBreakglassPassword).
    expect(users.map((u) => u.userName).sort()).toEqual(["default", ...WORKLOAD_ROLE_NAMES].sort());
    // The disabled default user still has a password (ElastiCache wants one): 64 hex characters, none of the roles'.
    const off = users.find((u) => u.userName === "default")!;
    expect(off.accessString).toMatch(/^off /);
    expect(off.passwords).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/)]);
    expect(rs.filter((r) => r.type === "kubernetes:core/v1:Secret" && (r.props as O).metadata.name === "llm-ha-redis")).toEqual([]);
  });

  it("the old token alone (a migration path): every client reads the one Secret's endpoint and password file; no container has a Redis password in its environment", async () => {
    const rs = await captureStack("prod", { "llm-ha:redisAuthToken": TEST_REDIS_TOKEN });
    const secret = rs.find((r) => r.type === "kubernetes:core/v1:Secret" && (r.props as O).metadata.name === "llm-ha-redis")?.props as O;
    expect(secret.stringData).toEqual({ endpoint: expect.stringMatching(/^rediss:\/\/[^:@]+:6379$/), password: TEST_REDIS_TOKEN });
    for (const x of containers(rs)) {
      const r = redisOf(x);
      if (r) expect([x.c.name, r]).toEqual([x.c.name, { secret: "llm-ha-redis", fileFromSameSecret: true }]);
      // No Redis URL with its password (the Secret's `url`), no password variable.
      for (const e of x.c.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef as O | undefined;
        expect(`${x.workload}/${x.c.name} ${e.name} ${ref ? `${ref.name}:${ref.key}` : ""}`).not.toMatch(/ llm-ha-redis[\w-]*:url$|REDIS\w*PASSWORD(?!_FILE)/);
      }
    }
  });
});
