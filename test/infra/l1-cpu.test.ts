/**
 * HAProxy's threads in the L1 pod follow its CPU limit: `nbthread` is the limit rounded up (at
 * least 1), overridable by `llm-ha:haproxy.nbthread`; unset, HAProxy would start a thread per CPU
 * of the node. And the relay's pool toward the continuation listener is sized to that listener.
 */
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { captureStack } from "../../infra/capture";
import { L1_CONTINUATION_MAXCONN, L1_CPU, l1Nbthread, l1ProxyManifests, type L1ProxySpec } from "../../infra/workloads/l1-proxy";
import { continuationMemory } from "../../infra/workloads/continuation";
import { DEFAULT_UPSTREAM_MAX_SOCKETS, loadContinueConfig } from "../../agent/src/edge/continuation/config";
import { checkHaproxyConfig } from "../../lab/engines/haproxy";
import { stackFailure } from "./stack-failure";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const spec: L1ProxySpec = {
  namespace: "llm-ha-edge", serversNamespace: "llm-ha", az: "us-east-1a", azs: ["us-east-1a", "us-east-1b"], slots: { "us-east-1a": 2, "us-east-1b": 2 },
  image: `haproxy@sha256:${"ab".repeat(32)}`, replicas: 2, publicSubnetId: "subnet-1", nlbName: "l1-a", tls: null,
  edge: { image: `agent@sha256:${"cd".repeat(32)}`, cluster: "prod", redisSecretName: "llm-ha-redis" },
};
const containers = (d: unknown): O[] => (d as O).spec.template.spec.containers as O[];
const cfgOf = (m: { configMap: unknown }): string => ((m.configMap as O).data as Record<string, string>)["haproxy.cfg"];
const nbthreadIn = (cfg: string): number | null => {
  const m = /^ {2}nbthread (\d+)$/m.exec(cfg);
  return m ? Number(m[1]) : null;
};

describe("HAProxy's threads in the L1 pod", () => {
  it("default: a 2-core limit on the HAProxy container and nbthread 2 in the config it runs", () => {
    const m = l1ProxyManifests(spec);
    const hap = containers(m.deployment).find((c) => c.name === "haproxy")!;
    expect(hap.resources.limits.cpu).toBe(`${L1_CPU.limitMillis}m`);
    expect(nbthreadIn(cfgOf(m))).toBe(2);
  });

  it("nbthread is the limit rounded up, at least 1; an explicit nbthread wins", () => {
    expect(l1Nbthread({ limitMillis: 1500 })).toBe(2);
    expect(l1Nbthread({ limitMillis: 4000 })).toBe(4);
    expect(l1Nbthread({ limitMillis: 250 })).toBe(1);
    expect(l1Nbthread({ limitMillis: 4000, nbthread: 1 })).toBe(1);
    const m = l1ProxyManifests({ ...spec, cpu: { limitMillis: 3500 } });
    expect(nbthreadIn(cfgOf(m))).toBe(4);
    expect(containers(m.deployment).find((c) => c.name === "haproxy")!.resources.limits.cpu).toBe("3500m");
    expect(nbthreadIn(cfgOf(l1ProxyManifests({ ...spec, cpu: { limitMillis: 3500, nbthread: 2 } })))).toBe(2);
  });

  it("the rendered config is one HAProxy accepts (haproxy -c)", () => {
    expect(() => checkHaproxyConfig(cfgOf(l1ProxyManifests({ ...spec, cpu: { limitMillis: 3000 } })).replace(/resolvers cluster\n {2}parse-resolv-conf/, "resolvers cluster\n  nameserver ns1 127.0.0.1:53"))).not.toThrow();
  });

  it("the relay's pool toward the continuation listener is that listener's maxconn, and the relay's default is the same number", () => {
    const m = l1ProxyManifests(spec);
    expect(cfgOf(m)).toMatch(new RegExp(`frontend inference_continuation\\n {2}bind unix@/var/run/llm-ha-continue/upstream\\.sock mode 666\\n {2}maxconn ${L1_CONTINUATION_MAXCONN}\\n`));
    const ct = containers(m.deployment).find((c) => c.name === "continue")!;
    const env = Object.fromEntries((ct.env as O[]).map((e) => [e.name, e.value]));
    expect(env.LLMHA_CONTINUE_UPSTREAM_MAX_SOCKETS).toBe(String(L1_CONTINUATION_MAXCONN));
    expect(loadContinueConfig([], env).upstreamPool).toEqual({ maxSockets: L1_CONTINUATION_MAXCONN, maxFreeSockets: L1_CONTINUATION_MAXCONN });
    expect(DEFAULT_UPSTREAM_MAX_SOCKETS).toBe(L1_CONTINUATION_MAXCONN);
  });

  it("the relay runs one process unless relayWorkers says more: HAProxy's SOCKS4 hop on loopback, or a socket each in HAProxy's config; memory sized to them", () => {
    const relay = (m: ReturnType<typeof l1ProxyManifests>): O => containers(m.deployment).find((c) => c.name === "continue")!;
    const envOf = (c: O): Record<string, string> => Object.fromEntries((c.env as O[]).map((e) => [e.name, e.value]));
    const one = l1ProxyManifests(spec);
    expect(envOf(relay(one)).LLMHA_CONTINUE_WORKERS).toBe("1");
    expect(loadContinueConfig([], envOf(relay(one))).workers).toBe(1);
    expect(relay(one).resources.requests.memory).toBe("128Mi");
    expect(relay(one).resources.limits.memory).toBe("512Mi");
    expect(cfgOf(one)).toContain("  server relay 127.0.0.1:9420 check");
    expect(cfgOf(one)).toContain("use_backend inference_relayed if");
    const three = l1ProxyManifests({ ...spec, cpu: { limitMillis: 4000, relayWorkers: 3 } });
    expect(envOf(relay(three)).LLMHA_CONTINUE_WORKERS).toBe("3");
    // Four processes (three workers and their primary) at ~60 MiB, and the streams.
    expect(relay(three).resources.requests.memory).toBe("320Mi");
    expect(relay(three).resources.limits.memory).toBe("640Mi");
    expect(continuationMemory(3)).toEqual({ requestMi: 320, limitMi: 640 });
    const cfg = cfgOf(three);
    // Several workers: completions to them, and on through the continuation listener (no relayed backend).
    expect(cfg).toContain("use_backend inference_continuation if");
    expect(cfg).not.toContain("socks4");
    expect(cfg).toContain("  balance leastconn\n  server relay-0 unix@/var/run/llm-ha-continue/relay-0.sock check");
    expect(cfg).toContain("  server relay-2 unix@/var/run/llm-ha-continue/relay-2.sock check");
    // HAProxy's threads stay the CPU limit's.
    expect(nbthreadIn(cfg)).toBe(4);
    expect(() => checkHaproxyConfig(cfg.replace(/resolvers cluster\n {2}parse-resolv-conf/, "resolvers cluster\n  nameserver ns1 127.0.0.1:53"))).not.toThrow();
  });
});

describe("llm-ha:haproxy.cpu and .nbthread (Pulumi mocks)", () => {
  const l1 = async (haproxy: Record<string, unknown>): Promise<{ cfgs: string[]; limits: string[] }> => {
    const rs = await captureStack("dev", { "llm-ha:haproxy": JSON.stringify(haproxy) });
    const cms = rs.filter((r) => r.type === "kubernetes:core/v1:ConfigMap").map((r) => r.props as O).filter((c) => c.data?.["haproxy.cfg"]);
    const deps = rs.filter((r) => r.type === "kubernetes:apps/v1:Deployment").map((r) => r.props as O).filter((d) => containers(d).some((c) => c.name === "haproxy"));
    expect(cms.length).toBeGreaterThanOrEqual(2);
    expect(deps.length).toBe(cms.length);
    return { cfgs: cms.map((c) => c.data["haproxy.cfg"] as string), limits: deps.map((d) => containers(d).find((c) => c.name === "haproxy")!.resources.limits.cpu as string) };
  };

  it("every AZ's L1 config renders nbthread from the CPU limit the stack sets, or the explicit one", async () => {
    const def = await l1({});
    expect(def.cfgs.map(nbthreadIn)).toEqual(def.cfgs.map(() => 2));
    expect(def.limits).toEqual(def.limits.map(() => "2000m"));
    const fractional = await l1({ cpu: "2.5" });
    expect(fractional.cfgs.map(nbthreadIn)).toEqual(fractional.cfgs.map(() => 3));
    expect(fractional.limits).toEqual(fractional.limits.map(() => "2500m"));
    const pinned = await l1({ cpu: "4000m", nbthread: 2 });
    expect(pinned.cfgs.map(nbthreadIn)).toEqual(pinned.cfgs.map(() => 2));
    expect(pinned.limits).toEqual(pinned.limits.map(() => "4000m"));
  });

  it("relayWorkers sets the relay's processes in every AZ's pod and config", async () => {
    const rs = await captureStack("dev", { "llm-ha:haproxy": JSON.stringify({ relayWorkers: 2 }) });
    const relays = rs.filter((r) => r.type === "kubernetes:apps/v1:Deployment").flatMap((r) => containers(r.props).filter((c) => c.name === "continue"));
    expect(relays.length).toBeGreaterThanOrEqual(2);
    for (const c of relays) expect((c.env as O[]).find((e) => e.name === "LLMHA_CONTINUE_WORKERS")?.value).toBe("2");
    const cfgs = rs.filter((r) => r.type === "kubernetes:core/v1:ConfigMap").map((r) => (r.props as O).data?.["haproxy.cfg"] as string | undefined).filter((c): c is string => !!c);
    for (const cfg of cfgs) expect(cfg).toContain("server relay-1 unix@/var/run/llm-ha-continue/relay-1.sock check");
  });

  it("refuses a CPU amount it cannot read, an nbthread below 1 and relayWorkers past 16, naming the key", async () => {
    const e = await stackFailure({ "llm-ha:haproxy": JSON.stringify({ cpu: "two", nbthread: 0, relayWorkers: 17 }) });
    expect(e.errors.map((x: pulumi.InputPropertyErrorDetails) => x.propertyPath)).toEqual(["llm-ha:haproxy.cpu", "llm-ha:haproxy.nbthread", "llm-ha:haproxy.relayWorkers"]);
    expect(e.message).toMatch(/llm-ha:haproxy\.relayWorkers.*must be at most 16/);
    expect(e.message).toMatch(/"two" must be a CPU amount of at least 100m, e\.g\. 2, 1\.5 or 1500m/);
    expect(e.message).toMatch(/llm-ha:haproxy\.nbthread.*must be an integer ≥ 1/);
  });
});
