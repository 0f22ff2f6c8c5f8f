/**
 * fast-image-pull-root-throughput over prod's captured graph: the program as it is passes (the
 * FastImagePull gate with a gp3 root at 1,000 MiB/s), and the fault it guards put back into the
 * graph — the gate on with the root volume's throughput removed (gp3's baseline) or at 125 MiB/s —
 * is refused, by that policy alone, naming each template. With the gate off, the same baseline
 * volume passes.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { captureStack, ofType, stackConfig, type CapturedResource } from "../../infra/capture";
import { policies } from "../../policies/all";
import { mandatory, runPolicies } from "../../policies/runner";
import { fastImagePullRootThroughput } from "../../policies/wake";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

let graph: CapturedResource[];
beforeAll(async () => {
  graph = await captureStack("prod");
}, 120_000);

const gpuTemplates = (rs: CapturedResource[]) => ofType(rs, "aws:ec2/launchTemplate:LaunchTemplate").filter((r) => r.name.startsWith("gpu-"));
const rootEbs = (lt: CapturedResource): O => (lt.props as O).blockDeviceMappings.find((m: O) => m.deviceName === "/dev/xvda").ebs;
function regress(change: (lt: CapturedResource) => void): CapturedResource[] {
  const rs = structuredClone(graph);
  for (const lt of gpuTemplates(rs)) change(lt);
  return rs;
}
const WHY =
  "AWS documents that SOCI parallel pull is slower than the default pull below about 600 MiB/s of root-volume throughput, and the snapshotter's root (/var/lib/soci-snapshotter-grpc) stays on the root volume even with localStorage RAID0. " +
  "Give /dev/xvda volumeType gp3 with throughput ≥ 600 (the program sets throughput 1000 and iops 16000), or turn the gate off (llm-ha:gpuFastImagePull false).";

describe("fast-image-pull-root-throughput", () => {
  it("passes prod as the program builds it, and the pack runs it as mandatory", async () => {
    expect(policies).toContain(fastImagePullRootThroughput);
    expect(fastImagePullRootThroughput.enforcementLevel).toBe("mandatory");
    expect(gpuTemplates(graph).length).toBeGreaterThan(0);
    expect(await runPolicies([fastImagePullRootThroughput], graph)).toEqual([]);
  });

  it("refuses the gate on a root volume whose throughput was removed (gp3's baseline), naming each template, and nothing else in the pack", async () => {
    const rs = regress((lt) => {
      delete rootEbs(lt).throughput;
      delete rootEbs(lt).iops;
    });
    const found = mandatory(await runPolicies(policies, rs));
    const lts = gpuTemplates(rs);
    expect(found.map((v) => [v.policy, v.urn])).toEqual(lts.map((lt) => ["fast-image-pull-root-throughput", lt.urn]));
    expect(found[0].message).toBe(
      `Launch template ${lts[0].name} enables nodeadm's FastImagePull (SOCI parallel pull) but its root volume /dev/xvda has gp3's baseline 125 MiB/s (throughput unset), below 600 MiB/s. ${WHY}`,
    );
  });

  it("refuses 125 MiB/s and 599 MiB/s, takes 600", async () => {
    const at = (t: number) => regress((lt) => (rootEbs(lt).throughput = t));
    const m = (await runPolicies([fastImagePullRootThroughput], at(125))).map((v) => v.message);
    expect(m).toHaveLength(gpuTemplates(graph).length);
    expect(m[0]).toMatch(/^Launch template gpu-[a-z0-9-]+-lt enables nodeadm's FastImagePull \(SOCI parallel pull\) but its root volume \/dev\/xvda has 125 MiB\/s, below 600 MiB\/s\. AWS documents/);
    expect(await runPolicies([fastImagePullRootThroughput], at(599))).toHaveLength(gpuTemplates(graph).length);
    expect(await runPolicies([fastImagePullRootThroughput], at(600))).toEqual([]);
  });

  it("refuses the gate with no root mapping or a root volume other than gp3", async () => {
    const none = regress((lt) => ((lt.props as O).blockDeviceMappings = []));
    expect((await runPolicies([fastImagePullRootThroughput], none))[0].message).toMatch(/but maps no EBS volume on \/dev\/xvda: the AMI's root volume keeps its own throughput/);
    const gp2 = regress((lt) => (rootEbs(lt).volumeType = "gp2"));
    expect((await runPolicies([fastImagePullRootThroughput], gp2))[0].message).toMatch(/but its root volume \/dev\/xvda is gp2, not gp3 with a provisioned throughput\./);
  });

  it("lets a baseline root through when the gate is off (llm-ha:gpuFastImagePull false)", async () => {
    const off = await captureStack("prod", { "llm-ha:gpuFastImagePull": "false" });
    expect(gpuTemplates(off).every((lt) => rootEbs(lt).throughput === undefined)).toBe(true);
    expect(await runPolicies([fastImagePullRootThroughput], off)).toEqual([]);
    expect(stackConfig("prod")["llm-ha:gpuFastImagePull"]).toBeUndefined();
  });
});
