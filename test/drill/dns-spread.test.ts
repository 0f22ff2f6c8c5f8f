import { describe, expect, it } from "vitest";
import { dnsSpreadOf } from "../../lab/drill/scenarios/dns-spread";

describe("dnsSpreadOf (az-loss: DNS answers per AZ against fair share)", () => {
  const weights = { "az-a": 2, "az-b": 2, "az-c": 2 };

  it("the weighted layout: the lost AZ's share split over the two healthy AZs", () => {
    const s = dnsSpreadOf({ "az-b": 310, "az-c": 290 }, weights, ["az-b", "az-c"]);
    expect(s.shares).toEqual({ "az-a": 0, "az-b": 310 / 600, "az-c": 290 / 600 });
    expect(s.fair).toEqual({ "az-b": 0.5, "az-c": 0.5 });
    expect(s.ratio).toBeCloseTo(1.033, 3);
  });

  it("the failover-pair layout: the neighbour takes 2/3, 1.33 × its fair share, over the 1.2 target", () => {
    expect(dnsSpreadOf({ "az-b": 400, "az-c": 200 }, weights, ["az-b", "az-c"]).ratio).toBeCloseTo(1.333, 3);
  });

  it("fair shares follow the weights; no answer at all is not measured", () => {
    expect(dnsSpreadOf({ "az-b": 200, "az-c": 400 }, { "az-a": 2, "az-b": 1, "az-c": 2 }, ["az-b", "az-c"]).ratio).toBeCloseTo(1, 6);
    expect(dnsSpreadOf({}, weights, ["az-b"]).ratio).toBeNull();
  });
});
