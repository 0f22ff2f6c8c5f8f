// The cloud's view of the public answer: the stack's own /az/health checks found by their tags
// (another stack's, or a check on another path, never), and an AZ served while more than 18 % of
// Route53's checkers report it healthy, as Route53 itself decides.
import { GetHealthCheckStatusCommand, ListHealthChecksCommand, ListTagsForResourcesCommand, Route53Client } from "@aws-sdk/client-route-53";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { findHealthChecks, route53Serving } from "../../lab/gameday/views";

const r53Mock = mockClient(Route53Client);
const r53 = new Route53Client({ region: "us-east-1", credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" } });
const check = (id: string, path = "/az/health") => ({ Id: id, CallerReference: id, HealthCheckVersion: 1, HealthCheckConfig: { Type: "HTTPS" as const, ResourcePath: path } });
const tags = (id: string, env: string, name: string) => ({ ResourceType: "healthcheck" as const, ResourceId: id, Tags: [{ Key: "Environment", Value: env }, { Key: "Name", Value: name }] });
const observations = (ok: number, bad: number) => ({
  HealthCheckObservations: [
    ...Array.from({ length: ok }, () => ({ StatusReport: { Status: "Success: HTTP Status Code 200, OK" } })),
    ...Array.from({ length: bad }, () => ({ StatusReport: { Status: "Failure: HTTP Status Code 503, Service Unavailable" } })),
  ],
});

describe("Route53's view of the public answer", () => {
  beforeEach(() => {
    r53Mock.reset();
    r53Mock.on(ListHealthChecksCommand).resolves({ HealthChecks: [check("hc-a"), check("hc-b"), check("hc-other"), check("hc-metrics", "/metrics")], IsTruncated: false, Marker: "", MaxItems: 100 });
    r53Mock.on(ListTagsForResourcesCommand).resolves({
      ResourceTagSets: [tags("hc-a", "prod", "infer.example.com us-east-1a"), tags("hc-b", "prod", "infer.example.com us-east-1b"), tags("hc-other", "staging", "infer.example.com us-east-1a")],
    });
  });

  it("finds the stack's check per AZ by its tags, and names an AZ without one", async () => {
    expect(await findHealthChecks(r53, "prod", ["us-east-1a", "us-east-1b"])).toEqual({ "us-east-1a": "hc-a", "us-east-1b": "hc-b" });
    await expect(findHealthChecks(r53, "prod", ["us-east-1a", "us-east-1c"])).rejects.toThrow(/no Route53 health check on \/az\/health tagged Environment=prod for us-east-1c/);
  });

  it("serves an AZ while more than 18 % of the checkers see it healthy", async () => {
    r53Mock.on(GetHealthCheckStatusCommand, { HealthCheckId: "hc-a" }).resolves(observations(3, 13));
    r53Mock.on(GetHealthCheckStatusCommand, { HealthCheckId: "hc-b" }).resolves(observations(2, 14));
    expect(await route53Serving(r53, { "us-east-1a": "hc-a", "us-east-1b": "hc-b" })).toEqual(["us-east-1a"]);
  });
});
