/**
 * Reads .dockerignore the way `docker build` does: which file it is (BuildKit's choice), its
 * patterns, and whether a context path is left out of the build context.
 */
import { existsSync } from "node:fs";
import { join, posix } from "node:path";

/** BuildKit prefers `<Dockerfile>.dockerignore` next to the Dockerfile over the context's `.dockerignore`. */
export function dockerignorePath(contextDir: string, dockerfilePath: string): string | null {
  const beside = `${dockerfilePath}.dockerignore`;
  if (existsSync(beside)) return beside;
  const root = join(contextDir, ".dockerignore");
  return existsSync(root) ? root : null;
}

export interface IgnorePattern {
  /** The cleaned pattern text. */
  readonly text: string;
  /** A `!` line: re-includes what earlier lines excluded. */
  readonly exception: boolean;
  readonly re: RegExp;
}

/** Docker's pattern → regular expression (moby/patternmatcher): `*` and `?` stop at `/`, `**` crosses it. */
export function patternRegExp(pattern: string): RegExp {
  let re = "^";
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === "*") {
      if (pattern[i + 1] === "*") {
        i++;
        if (pattern[i + 1] === "/") i++;
        re += i + 1 >= pattern.length ? ".*" : "(.*/)?";
      } else {
        re += "[^/]*";
      }
    } else if (ch === "?") {
      re += "[^/]";
    } else if (ch === "\\" && i + 1 < pattern.length) {
      re += `\\${pattern[++i]}`;
    } else if (ch === "[" || ch === "]" || ch === "-" || ch === "^") {
      // Character classes pass through as in Go's filepath.Match.
      re += ch;
    } else {
      re += ch.replace(/[.+()|{}$]/g, "\\$&");
    }
  }
  return new RegExp(`${re}$`);
}

/** The patterns of a .dockerignore, in order: comments and blank lines dropped, each cleaned and anchored at the context root. */
export function parseDockerignore(text: string): IgnorePattern[] {
  const out: IgnorePattern[] = [];
  for (const raw of text.split(/\r?\n/)) {
    let p = raw.trim();
    if (p === "" || p.startsWith("#")) continue;
    const exception = p.startsWith("!");
    if (exception) p = p.slice(1).trim();
    p = posix.normalize(p).replace(/^\/+/, "").replace(/\/+$/, "");
    if (p === "" || p === ".") continue;
    out.push({ text: p, exception, re: patternRegExp(p) });
  }
  return out;
}

/**
 * Whether the context path (relative, `/`-separated) is left out of the build context: the
 * last pattern that matches it or one of its parent folders decides (Docker's
 * MatchesOrParentMatches), so `*` then `!agent/src` keeps agent/src and nothing else of agent/.
 */
export function isIgnored(path: string, patterns: readonly IgnorePattern[]): boolean {
  const parts = path.split("/");
  const candidates = parts.map((_p, i) => parts.slice(0, i + 1).join("/"));
  let ignored = false;
  for (const p of patterns) {
    // As in Docker: an exclusion cannot change an excluded path, an exception an included one.
    if (p.exception !== ignored) continue;
    if (candidates.some((c) => p.re.test(c))) ignored = !p.exception;
  }
  return ignored;
}
