import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DaemonSet } from "kubernetes-models/apps/v1";
import { afterAll, describe, expect, it } from "vitest";
import { agentDaemonSet, XID_DIR, XID_LOG, XID_RELAY, XID_RELAY_STEP, XID_STATE, XID_VOLUME } from "../../infra/workloads/agent";
import { parseConfig } from "../../agent/src/config/load";
import { XidReader } from "../../agent/src/node/sources/xid";

/**
 * XIDs are on in production. The shipped DaemonSet relays the kernel log's XID lines
 * into a volume the unprivileged agent reads as `LLMHA_XID_LOG`; the relay's own pipeline runs
 * here against a stand-in `dmesg`, and the agent's reader reads what it wrote.
 */
const dir = mkdtempSync(join(tmpdir(), "llmha-agent-xid-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ds = agentDaemonSet({
  namespace: "llm-ha",
  az: "us-east-1a",
  gpuClass: { name: "h100", instanceType: "p5.48xlarge", instanceTypes: ["p5.48xlarge"], gpusPerNode: 8 } as never,
  image: "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-ha-agent@sha256:" + "a".repeat(64),
  clusterName: "prod",
  model: "meta-llama/Llama-3.1-70B-Instruct",
  redisSecretName: "llm-ha-redis",
});
// Plain data: the manifest is built from strings only in this spec.
const pod = (ds as unknown as { spec: { template: { spec: Record<string, unknown> } } }).spec.template.spec as {
  containers: { name: string; env: { name: string; value?: string }[]; command?: string[]; volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[]; securityContext: Record<string, unknown> }[];
  volumes: { name: string; emptyDir?: { medium?: string; sizeLimit?: string } }[];
};
const agent = pod.containers.find((c) => c.name === "agent")!;
const relay = pod.containers.find((c) => c.name === "xid-relay")!;

describe("agent DaemonSet: XIDs on", () => {
  it("validates against the Kubernetes schemas", () => {
    expect(() => new DaemonSet(ds as never).validate()).not.toThrow();
  });

  it("sets LLMHA_XID_LOG to a file on a read-only mount of the relay's volume, and the agent accepts the setting", () => {
    const xidEnv = agent.env.find((e) => e.name === "LLMHA_XID_LOG");
    expect(xidEnv?.value).toBe(XID_LOG);
    expect(XID_LOG.startsWith(`${XID_DIR}/`)).toBe(true);
    expect(agent.volumeMounts).toContainEqual({ name: XID_VOLUME, mountPath: XID_DIR, readOnly: true });
    expect(relay.volumeMounts).toContainEqual({ name: XID_VOLUME, mountPath: XID_DIR });
    expect(pod.volumes.find((v) => v.name === XID_VOLUME)?.emptyDir).toEqual({ medium: "Memory", sizeLimit: "8Mi" });
    const env = Object.fromEntries(agent.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
    // The Redis password file the manifest names exists on a node only: a stand-in here.
    const pw = join(dir, "redis-password");
    writeFileSync(pw, "pw\n");
    expect(parseConfig([], { ...env, LLMHA_REDIS_PASSWORD_FILE: pw }).xidLog).toBe(XID_LOG);
  });

  it("keeps the relay unprivileged: CAP_SYSLOG alone, no escalation, read-only root; the agent non-root with no capabilities; no API token", () => {
    expect(agent.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } });
    expect(relay.securityContext).toEqual({ runAsUser: 0, runAsNonRoot: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"], add: ["SYSLOG"] } });
    expect(JSON.stringify(pod)).not.toContain('"privileged"');
    expect((pod as unknown as { automountServiceAccountToken: boolean }).automountServiceAccountToken).toBe(false);
    expect(relay.command).toEqual(["sh", "-c", XID_RELAY]);
    expect(XID_RELAY).toContain("dmesg --syslog");
    expect(XID_RELAY).not.toContain("/dev/kmsg");
  });

  it("the relay's poll, run against a stand-in dmesg, appends only new XID lines, which the agent's reader reads", () => {
    const bin = join(dir, "bin");
    execFileSync("mkdir", ["-p", bin]);
    // What dmesg --syslog prints: the whole ring buffer, `[seconds] message`, from the file the test rewrites.
    const ring = join(dir, "ring");
    writeFileSync(join(bin, "dmesg"), `#!/bin/sh\n[ "$1" = "--syslog" ] || exit 64\ncat ${ring}\n`);
    chmodSync(join(bin, "dmesg"), 0o755);
    const log = join(dir, "kmsg.log");
    const state = join(dir, "last");
    writeFileSync(log, "");
    const old = "[ 8800.000001] NVRM: Xid (PCI:0000:11:00): 48, pid=1, name=python3, before the relay started";
    const poll = () =>
      execFileSync("sh", ["-c", XID_RELAY_STEP.replaceAll(XID_STATE, state).replaceAll(XID_LOG, log)], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    writeFileSync(ring, `${old}\n[ 8812.112233] eth0: link up\n`);
    const reader = new XidReader(log);
    expect(reader.read()).toEqual([]);
    poll();
    // The first poll records the position only: what was in the log before is not replayed.
    expect(readFileSync(log, "utf8")).toBe("");
    writeFileSync(
      ring,
      `${old}\n[ 8812.112233] eth0: link up\n[ 8812.901234] NVRM: Xid (PCI:0000:53:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n[ 8813.000001] NVRM: Xid (PCI:0000:64:00): 94, pid=4243, name=python3, Ch 00000008\n`,
    );
    poll();
    poll();
    expect(readFileSync(log, "utf8").trim().split("\n")).toHaveLength(2);
    expect(reader.read().map((x) => [x.code, x.busId])).toEqual([
      [79, "0000:53:00"],
      [94, "0000:64:00"],
    ]);
    reader.close();
  });
});
