/**
 * Bad settings exit 2 naming the right variable; empty values are
 * refused, unknown LLMHA_* names warned about; no URL credential reaches a log line,
 * an error message or /status.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseConfig, unknownSettings } from "../../agent/src/config/load";
import { safeUrl } from "../../agent/src/util/log";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");
const agent = (env: Record<string, string>) =>
  spawnSync(process.execPath, ["--import", "tsx", CLI, "agent"], { encoding: "utf8", timeout: 30_000, env: { PATH: process.env.PATH, HOME: process.env.HOME, LLMHA_AZ: "az-a", ...env } });

describe("settings named in their errors", () => {
  it("LLMHA_LOG_LEVEL=verbose exits 2 naming the variable and the levels", () => {
    const r = agent({ LLMHA_LOG_LEVEL: "verbose" });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("LLMHA_LOG_LEVEL");
    expect(r.stderr).toContain("debug");
    expect(r.stderr).not.toContain("    at ");
  });

  it("LLMHA_BIND_ADDRESS=999.1.1.1 exits 2 naming LLMHA_BIND_ADDRESS, not the port", () => {
    const r = agent({ LLMHA_BIND_ADDRESS: "999.1.1.1" });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("LLMHA_BIND_ADDRESS");
    expect(r.stderr).not.toContain("LLMHA_HTTP_PORT");
  });

  it("an empty value is refused, not taken as the default", () => {
    expect(() => parseConfig([], { LLMHA_HTTP_PORT: "" })).toThrow(/LLMHA_HTTP_PORT.*set but empty/);
    expect(() => parseConfig([], { LLMHA_NODE_ID: "" })).toThrow(/LLMHA_NODE_ID.*set but empty/);
  });

  it("warns about an LLMHA_* name no setting reads, with the closest real one", () => {
    expect(unknownSettings({ LLMHA_INTERVALMS: "200", LLMHA_HTTP_PORT: "1", PATH: "/x" })).toEqual([{ name: "LLMHA_INTERVALMS", suggestion: "LLMHA_INTERVAL_MS" }]);
    const r = agent({ LLMHA_INTERVALMS: "200", LLMHA_LOG_LEVEL: "nope" });
    expect(r.stderr).toContain("LLMHA_INTERVALMS is not a setting and is ignored (did you mean LLMHA_INTERVAL_MS?)");
  });
});

describe("URL credentials", () => {
  it("are masked in every form", () => {
    expect(safeUrl("redis://:s3cret@h:6379/0")).not.toContain("s3cret");
    expect(safeUrl("redis://s3cret@h:6379")).toBe("redis://redacted@h:6379");
    expect(safeUrl("http://svc:s3cret@h:8000")).toBe("http://svc:redacted@h:8000/");
    expect(safeUrl("http://s3cret@h")).not.toContain("s3cret");
    expect(safeUrl("ht tp://s3cret@h")).not.toContain("s3cret");
  });

  it("never reach a configuration error", () => {
    expect(() => parseConfig([], { LLMHA_INFERENCE_URL: "ftp://u:s3cret@h" })).toThrow(/LLMHA_INFERENCE_URL/);
    let msg = "";
    try {
      parseConfig([], { LLMHA_INFERENCE_URL: "ftp://u:s3cret@h" });
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).not.toContain("s3cret");
    try {
      parseConfig([], { LLMHA_INFERENCE_URL: "not a url //s3cret@h" });
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).not.toContain("s3cret");
  });
});
