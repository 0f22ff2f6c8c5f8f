/**
 * The front page and the docs hold together: every relative link in README.md, CHANGELOG.md
 * and docs/*.md names a file or folder of the repository, every `#anchor` names a heading of
 * its page, and no page points outside the repository (a design file or notes that only some
 * checkouts have). README stays a front page, not a manual.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..");
const PAGES = ["README.md", "CHANGELOG.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

/** The page without its fenced code blocks and inline code, where a `](…)` is not a link. */
function prose(text: string): string {
  return text.replace(/^```[^]*?^```/gm, "").replace(/`[^`\n]*`/g, "``");
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/`/g, "").replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
}

function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/^```[^]*?^```/gm, "");
  return new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1])));
}

/** Every `[text](target)` and `![alt](target)` of a page, by target. */
function links(page: string): string[] {
  return [...prose(readFileSync(join(ROOT, page), "utf8")).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]);
}

describe("links in README and docs", () => {
  it.each(PAGES)("%s: every relative link resolves inside the repository, anchors included", (page) => {
    const broken: string[] = [];
    for (const target of links(page)) {
      if (/^(https?:|mailto:)/.test(target)) continue;
      const [path, anchor] = target.split("#");
      const file = path === "" ? join(ROOT, page) : resolve(dirname(join(ROOT, page)), decodeURIComponent(path));
      if (relative(ROOT, file).startsWith("..")) broken.push(`${target}: outside the repository`);
      else if (!existsSync(file)) broken.push(`${target}: no such file`);
      else if (anchor && statSync(file).isFile() && file.endsWith(".md") && !anchors(file).has(anchor)) broken.push(`${target}: no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });

  it.each(PAGES)("%s: names no file outside the repository", (page) => {
    const text = readFileSync(join(ROOT, page), "utf8");
    expect(text).not.toMatch(/\.\.\/shared|\/work\/|shared\/DESIGN|DESIGN\.md/);
  });

  it("README is a front page of at most 150 lines that links the design, the settings and the changelog", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(readme.split("\n").length).toBeLessThanOrEqual(150);
    for (const page of ["docs/design.md", "docs/settings.md", "docs/architecture.md", "CHANGELOG.md"]) expect(links("README.md")).toContain(page);
  });
});
