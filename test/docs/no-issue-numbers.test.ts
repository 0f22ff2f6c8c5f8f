/**
 * The code and the docs speak to a reader who has no issue tracker: a comment, a page, a test
 * title or a message names the behaviour and why, never the number of the issue that asked
 * for it (a number tells a newcomer nothing). CHANGELOG.md is the one place
 * that keeps the history by its issues.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..");
const FOLDERS = ["agent", "contracts", "infra", "lab", "policies", "test", "scripts", "docs", "bin", ".ci"];
const SKIP = new Set(["node_modules", "dist", ".git"]);
const TEXT = /\.(ts|mts|cts|js|mjs|cjs|md|ya?ml|sh|lua|py|cfg|tmpl|json)$|^[^.]+$/;
/** "issue" or "issues", then a number ("#" allowed); a link to another project's issue (…/issues/N) is not one. */
const CITATION = /\b[Ii]ssues? #?\d+/;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIP.has(e.name)) return [];
    const path = join(dir, e.name);
    if (e.isDirectory()) return files(path);
    return e.isFile() && TEXT.test(e.name) ? [path] : [];
  });
}

describe("no issue numbers in the code and the docs", () => {
  it("names the behaviour, not the issue, everywhere but CHANGELOG.md", () => {
    const top = readdirSync(ROOT).filter((f) => f === "README.md" || /^Pulumi\..*ya?ml$/.test(f)).map((f) => join(ROOT, f));
    const all = [...top, ...FOLDERS.flatMap((f) => files(join(ROOT, f)))];
    expect(all.length).toBeGreaterThan(300);
    const found: string[] = [];
    for (const file of all) {
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          const m = CITATION.exec(line);
          if (m) found.push(`${relative(ROOT, file)}:${i + 1}: ${m[0]}`);
        });
    }
    expect(found, `cite the behaviour instead:\n${found.join("\n")}`).toEqual([]);
  });
});
