import { describe, expect, it } from "vitest";
import { parseStackYaml, StackYamlError, stackConfigValues } from "./stack-yaml";

/** The error `fn` throws, which must be a StackYamlError. */
function yamlError(fn: () => unknown): StackYamlError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(StackYamlError);
    return err as StackYamlError;
  }
  throw new Error("expected a StackYamlError");
}

describe("stack file reader (the yaml package)", () => {
  it("reads an anchor and its aliases, and a << merge key", () => {
    const text = [
      "config:",
      "  llm-ha:gpuClasses:",
      "    - &a100 {name: a100, desiredPerAz: 2, maxPerAz: 4}",
      "    - <<: *a100",
      "      name: h100",
      "  llm-ha:standbyAz: &sb us-east-1c",
      "  llm-ha:other: *sb",
    ].join("\n");
    expect(parseStackYaml(text)).toEqual({
      config: {
        "llm-ha:gpuClasses": [
          { name: "a100", desiredPerAz: 2, maxPerAz: 4 },
          { name: "h100", desiredPerAz: 2, maxPerAz: 4 },
        ],
        "llm-ha:standbyAz": "us-east-1c",
        "llm-ha:other": "us-east-1c",
      },
    });
  });

  it("reads literal and folded block scalars", () => {
    const text = ["config:", "  llm-ha:note: |", "    line one", "    line two", "  llm-ha:folded: >-", "    one", "    two", "  llm-ha:after: x"].join("\n");
    expect(stackConfigValues(text)).toEqual({ "llm-ha:note": "line one\nline two\n", "llm-ha:folded": "one two", "llm-ha:after": "x" });
  });

  it("leaves secure: values as the file holds them, top-level, nested and in flow form", () => {
    const text = [
      "config:",
      "  llm-ha:redisAuthToken:",
      "    secure: AAABAHk0c2VjcmV0Lw==",
      "  llm-ha:dns:",
      "    zoneId: Z1",
      "    apiKey:",
      "      secure: v1:abc:def==",
      "  llm-ha:flow: {secure: AAAB==}",
    ].join("\n");
    expect(stackConfigValues(text)).toEqual({
      "llm-ha:redisAuthToken": '{"secure":"AAABAHk0c2VjcmV0Lw=="}',
      "llm-ha:dns": '{"zoneId":"Z1","apiKey":{"secure":"v1:abc:def=="}}',
      "llm-ha:flow": '{"secure":"AAAB=="}',
    });
  });

  it("hands a top-level number or boolean as the file writes it, structured values as JSON", () => {
    const text = ["config:", "  llm-ha:version: 1.10", "  llm-ha:hex: 0x10", "  llm-ha:flag: True", "  llm-ha:n: 3", "  llm-ha:obj:", "    v: 1.10", "    on: true"].join("\n");
    expect(stackConfigValues(text)).toEqual({
      "llm-ha:version": "1.10",
      "llm-ha:hex": "0x10",
      "llm-ha:flag": "True",
      "llm-ha:n": "3",
      "llm-ha:obj": '{"v":1.1,"on":true}',
    });
  });

  it("reports a syntax error with its line and column", () => {
    const compact = yamlError(() => parseStackYaml(["config:", "  aws:region: us-east-1", "  llm-ha:dns: zoneId: Z1", "  llm-ha:standbyAz: us-east-1b"].join("\n")));
    expect(compact.message).toBe("line 3, column 15: Nested mappings are not allowed in compact mappings");
    // An unclosed flow list is found where the next key starts.
    const unclosed = yamlError(() => parseStackYaml(["config:", "  llm-ha:azs: [us-east-1a, us-east-1b", "  llm-ha:standbyAz: us-east-1b"].join("\n")));
    expect(unclosed.message).toMatch(/^line 3, column 3: Flow sequence .* end with a \]/);
    expect(yamlError(() => parseStackYaml("config:\n\taws:region: us-east-1\n")).message).toMatch(/^line 2, column 1: Tabs are not allowed as indentation/);
  });

  it("refuses a duplicate key and an alias without an anchor, naming the line", () => {
    expect(yamlError(() => parseStackYaml("config:\n  a: 1\n  a: 2\n")).message).toBe("line 3, column 3: Map keys must be unique");
    expect(yamlError(() => parseStackYaml("config:\n  a: *nope\n")).message).toBe("line 2, column 6: alias *nope has no anchor &nope before it");
  });

  it("reads an empty or comment-only file as null", () => {
    expect(parseStackYaml("")).toBeNull();
    expect(parseStackYaml("# nothing\n")).toBeNull();
    expect(stackConfigValues("# nothing\n")).toEqual({});
  });
});
