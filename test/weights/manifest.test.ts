/** `llm-ha weights manifest`: the file the S3 copy carries and preflight reads back. */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { copySteps, parseManifest, WEIGHTS_MANIFEST } from "../../infra/weights/manifest";
import { main } from "../../lab/cli";
import { runInProcess } from "../support/in-process";
import { testTempDir } from "../support/temp-dir";

const REV = "a09a35458c702b33eeacc393d103063234e8bc28";

function download(): string {
  const dir = testTempDir("llmha-weights-");
  fs.writeFileSync(path.join(dir, "config.json"), "{}");
  fs.writeFileSync(path.join(dir, "model-00001-of-00002.safetensors"), Buffer.alloc(1024, 1));
  fs.mkdirSync(path.join(dir, ".cache", "huggingface"), { recursive: true });
  fs.writeFileSync(path.join(dir, ".cache", "huggingface", "download.lock"), "");
  return dir;
}

describe("llm-ha weights manifest", () => {
  it("lists every model file with its size (and sha256 when asked), not the hub client's bookkeeping", async () => {
    const dir = download();
    const ran = await runInProcess(main, ["weights", "manifest", dir, "--repo", "Qwen/Qwen2.5-7B-Instruct", "--revision", REV, "--sha256"], {});
    expect(ran.code, ran.stderr).toBe(0);
    const m = parseManifest(fs.readFileSync(path.join(dir, WEIGHTS_MANIFEST), "utf8"));
    expect(m).toEqual({
      version: 1,
      repo: "Qwen/Qwen2.5-7B-Instruct",
      revision: REV,
      files: [
        { name: "config.json", size: 2, sha256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" },
        { name: "model-00001-of-00002.safetensors", size: 1024, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) },
      ],
    });
    expect(ran.stdout).toContain("Qwen/Qwen2.5-7B-Instruct@" + REV + ", 2 files");
  });

  it("refuses a revision that is not a commit, and a missing directory (exit 2)", async () => {
    expect((await runInProcess(main, ["weights", "manifest", download(), "--repo", "a/b", "--revision", "main"], {})).code).toBe(2);
    expect((await runInProcess(main, ["weights", "manifest", "/nonexistent/x", "--repo", "a/b", "--revision", REV], {})).code).toBe(2);
  });

  it("parses only a manifest with repo, revision and sized files; the copy steps write it last", () => {
    expect(parseManifest("{")).toMatch(/not JSON/);
    expect(parseManifest(JSON.stringify({ repo: "a/b", files: [] }))).toMatch(/no revision/);
    expect(parseManifest(JSON.stringify({ repo: "a/b", revision: REV, files: [{ name: "x" }] }))).toMatch(/no list of files/);
    const steps = copySteps("a/b", REV, "s3://bkt/p/").split(" && ");
    expect(steps[0]).toBe(`huggingface-cli download a/b --revision ${REV} --local-dir ./b --exclude 'original/*'`);
    expect(steps.at(-1)).toBe(`aws s3 cp ./b/${WEIGHTS_MANIFEST} s3://bkt/p/${WEIGHTS_MANIFEST}`);
  });
});
