import { describe, expect, it } from "vitest";
import { captureStack } from "./harness";

describe("smoke", () => {
  it("captures twice in one process", async () => {
    const a = await captureStack("dev");
    const b = await captureStack("prod");
    const c = await captureStack("dev", { "llm-ha:standbyAz": "" , "llm-ha:schedule": ""});
    console.log(a.length, b.length, c.length);
    await expect(captureStack("dev", { "llm-ha:azs": '["us-east-1a"]', "llm-ha:standbyAz": "eu-west-1a" })).rejects.toThrow(/azs/);
  });
});
