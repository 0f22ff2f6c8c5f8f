/**
 * `npm run image:check` builds from what scripts/dockerfile.ts reads out of agent/Dockerfile
 * and .dockerignore; the full check is too slow for `npm test`, so these pin the reading:
 * the image takes the agent, contracts/ and the lockfile, and nothing of the lab, infra or tests.
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  CopySourceError,
  DOCKERFILE_PATH,
  DockerfileError,
  REPO,
  contextCopies,
  localRunCommand,
  neededStages,
  parseDockerfile,
  parseInstructions,
  resolveCopy,
  stageDeps,
} from "../../scripts/dockerfile";
import { dockerignorePath, isIgnored, parseDockerignore } from "../../scripts/dockerignore";
const df = parseDockerfile(readFileSync(DOCKERFILE_PATH, "utf8"));
const ignorePath = dockerignorePath(REPO, DOCKERFILE_PATH);
const patterns = parseDockerignore(ignorePath ? readFileSync(ignorePath, "utf8") : "");

/** Every context file the image's COPYs take, as the check copies them. */
function copiedFiles(): string[] {
  return contextCopies(df).flatMap((c) => resolveCopy(c, REPO, patterns, "/app").map((f) => f.src));
}

describe("agent/Dockerfile as image:check reads it", () => {
  it("copies contracts/, agent/src, the lockfile and the build configuration from the context", () => {
    const sources = contextCopies(df).flatMap((c) => c.sources);
    expect(sources).toEqual(expect.arrayContaining(["contracts", "agent/src", "package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json", "bin"]));
    const files = copiedFiles();
    expect(files).toContain("package-lock.json");
    expect(files).toContain("agent/src/cli.ts");
    expect(files).toContain("agent/src/fleet/redis/acquire-3.lua");
    expect(files.some((f) => f.startsWith("contracts/") && f.endsWith(".ts"))).toBe(true);
  });

  it("takes nothing of lab/, infra/, policies/, test/ or any test file", () => {
    for (const f of copiedFiles()) {
      expect(f).not.toMatch(/^(lab|infra|policies|test|docs|node_modules|dist)\//);
      expect(f).not.toMatch(/\.test\.ts$/);
    }
    expect(isIgnored("lab/sim/sim-node.ts", patterns)).toBe(true);
    expect(isIgnored("infra/index.ts", patterns)).toBe(true);
    expect(isIgnored("agent/Dockerfile", patterns)).toBe(true);
  });

  it("builds build and deps for a final stage that runs as a non-root user", () => {
    expect(neededStages(df).map((s) => s.name)).toEqual(["build", "deps", null]);
    const final = df.stages[df.stages.length - 1];
    // build and deps copy from no stage, so the check builds them at once; the final one waits for both.
    expect(neededStages(df).map((s) => stageDeps(df, s).map((d) => d.name))).toEqual([[], [], ["deps", "build"]]);
    const user = final.instructions.find((i) => i.keyword === "USER")?.args ?? "root";
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    // The copies from other stages are the final stage's, not the context's.
    expect(contextCopies(df).every((c) => c.from === null)).toBe(true);
  });
});

describe("the agent image's base", () => {
  it("is Node 22 or 24 LTS, pinned by digest in every stage (Node 20 reached end of life on 2026-04-30)", () => {
    expect(["22", "24"]).toContain(df.globalArgs.NODE_VERSION);
    for (const s of df.stages) expect(s.base).toMatch(new RegExp(`^node:${df.globalArgs.NODE_VERSION}-bookworm-slim@sha256:[0-9a-f]{64}$`));
  });
});

describe("Dockerfile reading", () => {
  it("joins continuation lines, drops comments, substitutes ARGs into FROM", () => {
    const d = parseDockerfile("# syntax=docker/dockerfile:1\nARG V=20\nFROM node:${V}-slim AS b\nRUN a \\\n# inside\n && b\nCOPY --from=b --chown=1:1 /x ./y\n");
    expect(d.stages[0].base).toBe("node:20-slim");
    expect(d.stages[0].instructions.map((i) => [i.keyword, i.args])).toEqual([
      ["RUN", "a && b"],
      ["COPY", "--from=b --chown=1:1 /x ./y"],
    ]);
    expect(contextCopies(d)).toEqual([]);
  });

  it("refuses what it cannot reproduce instead of skipping it", () => {
    expect(() => contextCopies(parseDockerfile("FROM x\nADD a /b\n"))).toThrow(DockerfileError);
    expect(() => contextCopies(parseDockerfile("FROM x\nCOPY --exclude=*.md a /b\n"))).toThrow(DockerfileError);
    expect(() => parseInstructions("RUN <<EOF\necho\nEOF\n")).toThrow(DockerfileError);
    expect(() => neededStages(parseDockerfile("FROM x\nCOPY --from=nginx /a /b\n"))).toThrow(DockerfileError);
  });

  it("leaves only `npm cache clean` out of a RUN: it would empty this machine's cache", () => {
    expect(localRunCommand("npm ci && npm uninstall x && npm cache clean --force")).toEqual({ command: "npm ci && npm uninstall x", skipped: ["npm cache clean --force"] });
    expect(localRunCommand("npm run build").command).toBe("npm run build");
  });
});

describe(".dockerignore matching (Docker's rules)", () => {
  it("anchors patterns at the context root, applies them to parent folders, and lets `!` re-include", () => {
    const p = parseDockerignore("# c\n*\n!agent/src\n!/package.json\n**/*.test.ts\nnode_modules\n");
    expect(isIgnored("agent/src/cli.ts", p)).toBe(false);
    expect(isIgnored("agent/src/x.test.ts", p)).toBe(true);
    expect(isIgnored("agent/Dockerfile", p)).toBe(true);
    expect(isIgnored("package.json", p)).toBe(false);
    expect(isIgnored("README.md", p)).toBe(true);
    const q = parseDockerignore("node_modules\n*.log\n");
    // Unlike .gitignore, a pattern without `**` matches at the root only.
    expect(isIgnored("node_modules/a/index.js", q)).toBe(true);
    expect(isIgnored("agent/node_modules/a.js", q)).toBe(false);
    expect(isIgnored("a.log", q)).toBe(true);
    expect(isIgnored("agent/a.log", q)).toBe(false);
  });

  describe("resolving COPY sources", () => {
    const ctx = mkdtempSync(join(tmpdir(), "llm-ha-dockerfile-test-"));
    afterAll(() => rmSync(ctx, { recursive: true, force: true }));
    mkdirSync(join(ctx, "src", "sub"), { recursive: true });
    writeFileSync(join(ctx, "src", "a.ts"), "");
    writeFileSync(join(ctx, "src", "sub", "b.ts"), "");
    writeFileSync(join(ctx, "tsconfig.json"), "");
    writeFileSync(join(ctx, "tsconfig.build.json"), "");

    it("puts a folder's contents into the destination and files into a destination folder", () => {
      const d = parseDockerfile("FROM x\nWORKDIR /app\nCOPY src ./src\nCOPY tsconfig*.json ./\n");
      const out = contextCopies(d).flatMap((c) => resolveCopy(c, ctx, [], "/app"));
      expect(out).toEqual(
        expect.arrayContaining([
          { src: "src/a.ts", dest: "/app/src/a.ts" },
          { src: "src/sub/b.ts", dest: "/app/src/sub/b.ts" },
          { src: "tsconfig.json", dest: "/app/tsconfig.json" },
          { src: "tsconfig.build.json", dest: "/app/tsconfig.build.json" },
        ]),
      );
      expect(out).toHaveLength(4);
    });

    it("fails, as docker build does, on a source that is missing or ignored", () => {
      const [copy] = contextCopies(parseDockerfile("FROM x\nCOPY src ./src\n"));
      expect(() => resolveCopy(copy, ctx, parseDockerignore("src\n"), "/app")).toThrow(CopySourceError);
      const [missing] = contextCopies(parseDockerfile("FROM x\nCOPY nope ./\n"));
      expect(() => resolveCopy(missing, ctx, [], "/app")).toThrow(CopySourceError);
    });
  });
});
