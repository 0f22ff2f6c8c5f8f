import { describe, expect, it } from "vitest";
import {
  gpuInstanceTypesAllowed,
  gpuLaunchTemplateImdsv2,
  gpuNodeGroupSingleAz,
  gpuNodeGroupTaintAndLabels,
  gpuNodeGroupsMultiAz,
} from "../../policies/gpu";
import { changed, happyStack, messages } from "./fixtures";

const NG = "gpu-us-east-1a-h100";

describe("gpu-node-groups-multi-az", () => {
  it("passes with GPU groups in three AZs", async () => {
    expect(await messages(gpuNodeGroupsMultiAz, happyStack())).toEqual([]);
  });

  it("fails when every GPU group sits in one AZ", async () => {
    const rs = happyStack().filter((r) => r.type !== "aws:eks/nodeGroup:NodeGroup" || r.name === NG);
    expect(await messages(gpuNodeGroupsMultiAz, rs)).toEqual([
      "GPU node groups cover 1 AZ (us-east-1a); at least 2 are required.",
    ]);
  });

  it("reads the AZ from the subnet, not from the label", async () => {
    const rs = happyStack().filter((r) => r.type !== "aws:eks/nodeGroup:NodeGroup" || r.name === NG || r.name === "gpu-us-east-1b-h100");
    const b = rs.find((r) => r.name === "gpu-us-east-1b-h100");
    if (b) b.props.subnetIds = ["private-us-east-1a-id"];
    expect(await messages(gpuNodeGroupsMultiAz, rs)).toEqual([
      "GPU node groups cover 1 AZ (us-east-1a); at least 2 are required.",
    ]);
  });

  it("takes minAzs from config", async () => {
    expect(await messages(gpuNodeGroupsMultiAz, happyStack(), { "gpu-node-groups-multi-az": { minAzs: 4 } })).toEqual([
      "GPU node groups cover 3 AZs (us-east-1a, us-east-1b, us-east-1c); at least 4 are required.",
    ]);
  });

  it("fails a stack with no GPU node groups", async () => {
    const rs = happyStack().filter((r) => r.type !== "aws:eks/nodeGroup:NodeGroup");
    expect(await messages(gpuNodeGroupsMultiAz, rs)).toEqual([
      "The stack has no GPU node groups; it needs GPU node groups in at least 2 AZs.",
    ]);
  });
});

describe("gpu-node-group-single-az", () => {
  it("passes with one subnet per group", async () => {
    expect(await messages(gpuNodeGroupSingleAz, happyStack())).toEqual([]);
  });

  it("fails a group given subnets in two AZs", async () => {
    const rs = changed(NG, (p) => (p.subnetIds = ["private-us-east-1a-id", "private-us-east-1b-id"]));
    expect(await messages(gpuNodeGroupSingleAz, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 spans 2 AZs (us-east-1a, us-east-1b); pin it to one AZ.",
    ]);
  });

  it("fails two subnets whose AZs are unknown", async () => {
    const rs = changed(NG, (p) => (p.subnetIds = ["subnet-aaa", "subnet-bbb"]));
    expect(await messages(gpuNodeGroupSingleAz, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 has 2 subnets whose AZs are not in the stack; give it exactly one subnet.",
    ]);
  });

  it("fails a group with no subnets", async () => {
    const rs = changed(NG, (p) => delete p.subnetIds);
    expect(await messages(gpuNodeGroupSingleAz, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 has no subnetIds; give it the subnet of exactly one AZ.",
    ]);
  });

  it("fails an AZ label that contradicts the subnet", async () => {
    const rs = changed(NG, (p) => (p.subnetIds = ["private-us-east-1b-id"]));
    expect(await messages(gpuNodeGroupSingleAz, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 is labelled llm-ha.io/az=us-east-1a but its subnet is in us-east-1b.",
    ]);
  });
});

describe("gpu-node-group-taint-and-labels", () => {
  it("passes with the taint and all labels", async () => {
    expect(await messages(gpuNodeGroupTaintAndLabels, happyStack())).toEqual([]);
  });

  it("fails without the taint", async () => {
    expect(await messages(gpuNodeGroupTaintAndLabels, changed(NG, (p) => (p.taints = [])))).toEqual([
      "GPU node group gpu-us-east-1a-h100 has no nvidia.com/gpu taint with effect NO_SCHEDULE.",
    ]);
  });

  it("fails a PREFER_NO_SCHEDULE taint", async () => {
    const rs = changed(NG, (p) => (p.taints = [{ key: "nvidia.com/gpu", value: "true", effect: "PREFER_NO_SCHEDULE" }]));
    expect(await messages(gpuNodeGroupTaintAndLabels, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 has no nvidia.com/gpu taint with effect NO_SCHEDULE.",
    ]);
  });

  it("fails without the role and AZ labels", async () => {
    const rs = changed(NG, (p) => (p.labels = { "llm-ha.io/gpu-class": "h100" }));
    expect(await messages(gpuNodeGroupTaintAndLabels, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 lacks the labels llm-ha.io/az and llm-ha.io/az-role.",
    ]);
  });

  it("catches a GPU group by instance type even with no labels", async () => {
    const rs = changed(NG, (p) => {
      delete p.labels;
      delete p.amiType;
    });
    expect(await messages(gpuNodeGroupTaintAndLabels, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 lacks the labels llm-ha.io/gpu-class, llm-ha.io/az and llm-ha.io/az-role.",
    ]);
  });

  it("fails an unknown role", async () => {
    const rs = changed(NG, (p) => ((p.labels as Record<string, string>)["llm-ha.io/az-role"] = "spare"));
    expect(await messages(gpuNodeGroupTaintAndLabels, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 has llm-ha.io/az-role=spare; use active or standby.",
    ]);
  });

  it("leaves a CPU system group alone", async () => {
    const rs = changed(NG, (p) => {
      delete p.labels;
      delete p.amiType;
      p.taints = [];
      p.instanceTypes = ["m7i.xlarge"];
    });
    expect(await messages(gpuNodeGroupTaintAndLabels, rs)).toEqual([]);
  });
});

describe("gpu-instance-types-allowed", () => {
  it("passes p5.48xlarge", async () => {
    expect(await messages(gpuInstanceTypesAllowed, happyStack())).toEqual([]);
  });

  it("fails a type outside the list", async () => {
    expect(await messages(gpuInstanceTypesAllowed, changed(NG, (p) => (p.instanceTypes = ["g5.48xlarge"])))).toEqual([
      "GPU node group gpu-us-east-1a-h100 uses g5.48xlarge, not in the allowed instance types (p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge).",
    ]);
  });

  it("fails a group with no instance types", async () => {
    expect(await messages(gpuInstanceTypesAllowed, changed(NG, (p) => delete p.instanceTypes))).toEqual([
      "GPU node group gpu-us-east-1a-h100 sets no instanceTypes; allowed: p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge.",
    ]);
  });

  it("takes the list from config", async () => {
    const rs = changed(NG, (p) => (p.instanceTypes = ["g5.48xlarge"]));
    const cfg = { "gpu-instance-types-allowed": { allowedInstanceTypes: ["p5.48xlarge", "p5e.48xlarge", "g5.48xlarge"] } };
    expect(await messages(gpuInstanceTypesAllowed, rs, cfg)).toEqual([]);
  });
});

describe("gpu-launch-template-imdsv2", () => {
  it("passes with httpTokens required", async () => {
    expect(await messages(gpuLaunchTemplateImdsv2, happyStack())).toEqual([]);
  });

  it("fails optional tokens (IMDSv1 allowed)", async () => {
    const rs = changed("gpu-us-east-1a-lt", (p) => (p.metadataOptions = { httpTokens: "optional" }));
    expect(await messages(gpuLaunchTemplateImdsv2, rs)).toEqual([
      'Launch template gpu-us-east-1a-lt of GPU node group gpu-us-east-1a-h100 has metadataOptions.httpTokens "optional"; it must be "required" (IMDSv2).',
    ]);
  });

  it("fails unset metadata options", async () => {
    const rs = changed("gpu-us-east-1a-lt", (p) => delete p.metadataOptions);
    expect(await messages(gpuLaunchTemplateImdsv2, rs)).toEqual([
      'Launch template gpu-us-east-1a-lt of GPU node group gpu-us-east-1a-h100 has metadataOptions.httpTokens unset; it must be "required" (IMDSv2).',
    ]);
  });

  it("fails a GPU group without a launch template", async () => {
    expect(await messages(gpuLaunchTemplateImdsv2, changed(NG, (p) => delete p.launchTemplate))).toEqual([
      'GPU node group gpu-us-east-1a-h100 has no launchTemplate; it needs one with metadataOptions.httpTokens "required".',
    ]);
  });

  it("fails a launch template outside the stack", async () => {
    const rs = changed(NG, (p) => (p.launchTemplate = { id: "lt-0abc", version: "3" }));
    expect(await messages(gpuLaunchTemplateImdsv2, rs)).toEqual([
      "GPU node group gpu-us-east-1a-h100 uses launch template lt-0abc, which is not in the stack; IMDSv2 cannot be verified.",
    ]);
  });
});
