/**
 * Fast image pull on the GPU nodes (`llm-ha:gpuFastImagePull`, default true): every GPU launch
 * template's NodeConfig turns on nodeadm's `FastImagePull` gate and its gp3 root volume gets
 * 1,000 MiB/s and 16,000 IOPS (the SOCI snapshotter unpacks onto the root volume). `false`
 * gives the templates exactly as before: no gate, baseline gp3. Anything else is refused,
 * naming the key. (The default is checked in every environment's stack by deployability-checks.)
 */
import { beforeAll, describe, expect, it } from "vitest";
import { captureStack, ofType, type CapturedResource } from "../../infra/capture";
import { problems, resolveWith } from "./resolve-dev";
import { FAST_PULL_USER_DATA, NVME_RAID0_USER_DATA } from "../../infra/gpu-node-groups";
import { enablesFastImagePull } from "../../contracts/fast-image-pull";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- captured props are untyped JSON

const gpuTemplates = (rs: CapturedResource[]) => ofType(rs, "aws:ec2/launchTemplate:LaunchTemplate").filter((r) => r.name.startsWith("gpu-"));
const userData = (r: CapturedResource) => Buffer.from((r.props as O).userData as string, "base64").toString();

describe("the prod stack", () => {
  let on: CapturedResource[];
  let off: CapturedResource[];
  beforeAll(async () => {
    on = await captureStack("prod");
    off = await captureStack("prod", { "llm-ha:gpuFastImagePull": "false" });
  }, 120_000);

  it("on by default: the FastImagePull gate in every GPU template's NodeConfig, on a gp3 root at 1,000 MiB/s and 16,000 IOPS", () => {
    const lts = gpuTemplates(on);
    expect(lts.length).toBeGreaterThan(0);
    for (const lt of lts) {
      expect(userData(lt), lt.name).toBe(FAST_PULL_USER_DATA);
      expect(enablesFastImagePull(userData(lt))).toBe(true);
      expect((lt.props as O).blockDeviceMappings[0]).toMatchObject({ deviceName: "/dev/xvda", ebs: { volumeType: "gp3", throughput: 1000, iops: 16000 } });
    }
    // The system nodes' templates are left alone.
    for (const lt of ofType(on, "aws:ec2/launchTemplate:LaunchTemplate").filter((r) => !r.name.startsWith("gpu-"))) {
      expect(JSON.stringify(lt.props)).not.toContain("throughput");
    }
  });

  it("llm-ha:gpuFastImagePull false: no gate and a baseline gp3 root, the templates otherwise unchanged", () => {
    const lts = gpuTemplates(off);
    expect(lts.map((r) => r.name)).toEqual(gpuTemplates(on).map((r) => r.name));
    for (const lt of lts) {
      expect(userData(lt), lt.name).toBe(NVME_RAID0_USER_DATA);
      expect(enablesFastImagePull(userData(lt))).toBe(false);
      expect(userData(lt)).not.toContain("featureGates");
      const p = lt.props as O;
      expect(p.blockDeviceMappings).toEqual([{ deviceName: "/dev/xvda", ebs: { volumeSize: 500, volumeType: "gp3", encrypted: "true", deleteOnTermination: "true" } }]);
      // Everything else as with fast pull on.
      const twin = gpuTemplates(on).find((r) => r.name === lt.name)!.props as O;
      const rest = (x: O) => ({ ...x, userData: undefined, blockDeviceMappings: undefined });
      expect(rest(p)).toEqual(rest(twin));
    }
    expect(off.length).toBe(on.length);
  });
});

describe("the setting", () => {

  it("defaults to on, takes true and false, and refuses anything else naming the key", () => {
    expect(resolveWith({}).gpuFastImagePull).toBe(true);
    expect(resolveWith({ "llm-ha:gpuFastImagePull": "true" }).gpuFastImagePull).toBe(true);
    expect(resolveWith({ "llm-ha:gpuFastImagePull": "false" }).gpuFastImagePull).toBe(false);
    expect(problems({ "llm-ha:gpuFastImagePull": "fast" })).toEqual(['llm-ha:gpuFastImagePull: must be true or false, got "fast"']);
    expect(problems({ "llm-ha:gpuFastImagePull": "1000" })).toEqual(['llm-ha:gpuFastImagePull: must be true or false, got "1000"']);
  });
});

describe("enablesFastImagePull", () => {
  it("reads the gate in YAML and JSON NodeConfigs, and only when it is true", () => {
    expect(enablesFastImagePull("spec:\n  featureGates:\n    FastImagePull: true\n")).toBe(true);
    expect(enablesFastImagePull('{"spec":{"featureGates":{"FastImagePull": true}}}')).toBe(true);
    expect(enablesFastImagePull("spec:\n  featureGates: {FastImagePull: true}\n")).toBe(true);
    expect(enablesFastImagePull("spec:\n  featureGates:\n    FastImagePull: false\n")).toBe(false);
    expect(enablesFastImagePull("spec:\n  featureGates:\n    InstanceIdNodeName: true\n")).toBe(false);
  });
});
