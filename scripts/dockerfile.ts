/**
 * Reads agent/Dockerfile the way `docker build` does (its .dockerignore: ./dockerignore), for
 * the subset of the syntax the image uses, so that `npm run image:check` builds from the very
 * instructions the image is built from: the file list, the RUN commands and the entrypoint
 * cannot drift from a copy kept in the check. Anything outside that subset is an error, not a
 * silent skip, so a new Dockerfile feature makes the check fail loudly until it learns it.
 */
import { lstatSync, readdirSync } from "node:fs";
import { join, posix } from "node:path";
import { isIgnored, patternRegExp, type IgnorePattern } from "./dockerignore";

/** The repository root: the build context of the image. */
export const REPO = join(__dirname, "..");
export const DOCKERFILE_PATH = join(REPO, "agent", "Dockerfile");

/** The Dockerfile or .dockerignore uses something this reader does not understand. */
export class DockerfileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DockerfileError";
  }
}

export interface Instruction {
  /** Upper-cased: `COPY`, `RUN`, … */
  readonly keyword: string;
  /** Everything after the keyword, continuation lines joined. */
  readonly args: string;
  /** 1-based line of the keyword, for messages. */
  readonly line: number;
}

export interface Stage {
  readonly index: number;
  /** The `AS` name, lower-cased as Docker compares it; null when unnamed. */
  readonly name: string | null;
  /** The base image, ARGs substituted. */
  readonly base: string;
  readonly instructions: readonly Instruction[];
}

export interface Dockerfile {
  /** ARGs declared before the first FROM, with their defaults. */
  readonly globalArgs: Readonly<Record<string, string>>;
  readonly stages: readonly Stage[];
}

export interface CopyInstruction {
  readonly line: number;
  /** `--from=` value (stage name or index); null for a copy from the build context. */
  readonly from: string | null;
  readonly sources: readonly string[];
  readonly dest: string;
}

const IGNORED_FLAGS = new Set(["chown", "chmod", "link"]);

/** Splits the file into instructions: comments dropped, `\` continuations joined (comment lines inside them too, as Docker does). */
export function parseInstructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split(/\r?\n/);
  let buf: string | null = null;
  let start = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    const trimmed = raw.trim();
    if (trimmed.startsWith("#")) continue;
    if (buf === null) {
      if (trimmed === "") continue;
      buf = "";
      start = i + 1;
    } else if (trimmed === "") {
      continue;
    }
    const continued = /\\\s*$/.test(raw);
    buf += (buf ? " " : "") + (continued ? raw.replace(/\\\s*$/, "") : raw).trim();
    if (!continued) {
      out.push(toInstruction(buf, start));
      buf = null;
    }
  }
  if (buf !== null) out.push(toInstruction(buf, start));
  return out;
}

function toInstruction(text: string, line: number): Instruction {
  const m = /^(\S+)\s*(.*)$/.exec(text);
  if (!m) throw new DockerfileError(`line ${line}: cannot read "${text}"`);
  const keyword = m[1].toUpperCase();
  if (/<<-?\s*["']?[A-Za-z_]/.test(m[2]) && (keyword === "RUN" || keyword === "COPY")) {
    throw new DockerfileError(`line ${line}: heredocs are not supported by scripts/dockerfile.ts`);
  }
  return { keyword, args: m[2], line };
}

/** `${NAME}`, `${NAME:-default}` and `$NAME` from `vars`; an unknown name is empty, as in Docker. */
export function substitute(text: string, vars: Readonly<Record<string, string>>): string {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_m, braced: string | undefined, dflt: string | undefined, bare: string | undefined) => {
    const name = braced ?? bare ?? "";
    const v = vars[name];
    return v !== undefined && v !== "" ? v : (dflt ?? "");
  });
}

/** `NAME=value` pairs of ARG/ENV (quotes removed), or the legacy `ENV NAME value` form. */
export function parseAssignments(args: string, keyword: string, line: number): Record<string, string> {
  const out: Record<string, string> = {};
  const words = splitWords(args);
  if (keyword === "ENV" && words.length >= 2 && !words[0].includes("=")) {
    out[words[0]] = words.slice(1).join(" ");
    return out;
  }
  for (const w of words) {
    const eq = w.indexOf("=");
    if (eq === 0) throw new DockerfileError(`line ${line}: bad ${keyword} "${w}"`);
    if (eq < 0) {
      if (keyword === "ENV") throw new DockerfileError(`line ${line}: ENV ${w} has no value`);
      out[w] = "";
    } else {
      out[w.slice(0, eq)] = w.slice(eq + 1);
    }
  }
  return out;
}

/** Whitespace-separated words; double or single quotes group and are removed. */
function splitWords(s: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  let cur = "";
  let last = -1;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    const piece = m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : (m[2] ?? m[3] ?? "");
    if (last === m.index) cur += piece;
    else {
      if (last >= 0) out.push(cur);
      cur = piece;
    }
    last = re.lastIndex;
  }
  if (last >= 0) out.push(cur);
  return out;
}

/** Stages with their instructions; ARG defaults substituted into FROM. */
export function parseDockerfile(text: string): Dockerfile {
  const globalArgs: Record<string, string> = {};
  const stages: Stage[] = [];
  let current: { index: number; name: string | null; base: string; instructions: Instruction[] } | null = null;
  for (const ins of parseInstructions(text)) {
    if (ins.keyword === "FROM") {
      const words = splitWords(ins.args).filter((w) => !w.startsWith("--platform="));
      if (words.length !== 1 && !(words.length === 3 && words[1].toLowerCase() === "as")) {
        throw new DockerfileError(`line ${ins.line}: FROM <image> [AS <name>] expected`);
      }
      current = { index: stages.length, name: words[2]?.toLowerCase() ?? null, base: substitute(words[0], globalArgs), instructions: [] };
      stages.push(current);
    } else if (!current) {
      if (ins.keyword !== "ARG") throw new DockerfileError(`line ${ins.line}: only ARG may come before the first FROM`);
      Object.assign(globalArgs, parseAssignments(ins.args, "ARG", ins.line));
    } else {
      current.instructions.push(ins);
    }
  }
  if (stages.length === 0) throw new DockerfileError("no FROM: not a Dockerfile");
  return { globalArgs, stages };
}

/** The arguments of a JSON-form instruction (`["a", "b"]`), or null for the shell form. */
export function jsonForm(args: string, line: number): string[] | null {
  if (!args.trimStart().startsWith("[")) return null;
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    // Docker treats a malformed JSON array as the shell form; for COPY/ENTRYPOINT here that is a typo, not intent.
    throw new DockerfileError(`line ${line}: malformed JSON array ${args}`);
  }
  if (!Array.isArray(v) || !v.every((x): x is string => typeof x === "string")) throw new DockerfileError(`line ${line}: JSON form must be an array of strings`);
  return v;
}

export function parseCopy(ins: Instruction, vars: Readonly<Record<string, string>> = {}): CopyInstruction {
  if (ins.keyword !== "COPY") throw new DockerfileError(`line ${ins.line}: ${ins.keyword} is not supported by scripts/dockerfile.ts (use COPY)`);
  let rest = ins.args.trim();
  let from: string | null = null;
  for (let m = /^--([a-z-]+)(?:=(\S*))?\s+/.exec(rest); m; m = /^--([a-z-]+)(?:=(\S*))?\s+/.exec(rest)) {
    if (m[1] === "from") from = substitute(m[2] ?? "", vars).toLowerCase();
    else if (!IGNORED_FLAGS.has(m[1])) throw new DockerfileError(`line ${ins.line}: COPY --${m[1]} is not supported by scripts/dockerfile.ts`);
    rest = rest.slice(m[0].length);
  }
  const words = (jsonForm(rest, ins.line) ?? splitWords(rest)).map((w) => substitute(w, vars));
  if (words.length < 2) throw new DockerfileError(`line ${ins.line}: COPY needs a source and a destination`);
  const dest = words[words.length - 1];
  const sources = words.slice(0, -1);
  if (sources.length > 1 && !dest.endsWith("/")) throw new DockerfileError(`line ${ins.line}: COPY with several sources needs a destination ending in /`);
  return { line: ins.line, from, sources, dest };
}

/** Every COPY from the build context, in every stage: what the image takes from the checkout. An ADD is an error (parseCopy), not a file left out of the list. */
export function contextCopies(df: Dockerfile): CopyInstruction[] {
  return df.stages
    .flatMap((s) => s.instructions.filter((i) => i.keyword === "COPY" || i.keyword === "ADD").map((i) => parseCopy(i)))
    .filter((c) => c.from === null);
}

// ---- resolving COPY sources against the context -------------------------------------------

export interface ContextFile {
  /** Path in the context, relative, `/`-separated. */
  readonly src: string;
  /** Path in the stage, absolute (`/app/agent/src/cli.ts`). */
  readonly dest: string;
}

/** Thrown for a COPY source that is missing, or entirely hidden by .dockerignore: `docker build` fails on it too. */
export class CopySourceError extends DockerfileError {
  constructor(line: number, source: string, why: string) {
    super(`line ${line}: COPY ${source}: ${why}`);
    this.name = "CopySourceError";
  }
}

const GLOB = /[*?[]/;

function walk(root: string, rel: string, patterns: readonly IgnorePattern[], out: string[]): void {
  for (const e of readdirSync(join(root, rel), { withFileTypes: true })) {
    const p = `${rel}/${e.name}`;
    if (e.isDirectory()) walk(root, p, patterns, out);
    else if (!isIgnored(p, patterns)) out.push(p);
  }
}

/**
 * The context files one COPY takes and where each lands, `workdir` being the stage's WORKDIR:
 * a folder's contents go into the destination, a file into it (destination ending in `/`)
 * or onto it. Globs are supported in the last path segment only.
 */
export function resolveCopy(copy: CopyInstruction, contextDir: string, patterns: readonly IgnorePattern[], workdir: string): ContextFile[] {
  if (copy.from !== null) throw new DockerfileError(`line ${copy.line}: resolveCopy is for copies from the context, not --from=${copy.from}`);
  const destBase = posix.resolve(workdir, copy.dest);
  const destIsDir = copy.dest.endsWith("/") || copy.sources.length > 1;
  const out: ContextFile[] = [];
  for (const source of copy.sources) {
    const clean = posix.normalize(source).replace(/^\/+/, "").replace(/\/+$/, "");
    if (clean.startsWith("..")) throw new CopySourceError(copy.line, source, "is outside the build context");
    let matches: string[];
    if (GLOB.test(clean)) {
      const dir = posix.dirname(clean);
      if (GLOB.test(dir)) throw new DockerfileError(`line ${copy.line}: COPY ${source}: globs only in the last path segment are supported`);
      const re = patternRegExp(posix.basename(clean));
      let names: string[] = [];
      try {
        names = readdirSync(join(contextDir, dir));
      } catch {
        // A missing folder matches nothing: reported below as a missing source.
      }
      matches = names.filter((n) => re.test(n)).map((n) => (dir === "." ? n : `${dir}/${n}`));
      if (matches.length > 1 && !destIsDir) throw new DockerfileError(`line ${copy.line}: COPY ${source} matches several files: the destination must end in /`);
    } else {
      matches = [clean];
    }
    const before = out.length;
    for (const m of matches) {
      let st;
      try {
        st = lstatSync(join(contextDir, m));
      } catch {
        continue;
      }
      if (st.isDirectory()) {
        const files: string[] = [];
        walk(contextDir, m, patterns, files);
        // A folder copied whole lands in the destination (its contents, not the folder itself).
        for (const f of files) out.push({ src: f, dest: posix.join(destBase, f.slice(m.length + 1)) });
      } else if (!isIgnored(m, patterns)) {
        out.push({ src: m, dest: destIsDir || GLOB.test(clean) ? posix.join(destBase, posix.basename(m)) : destBase });
      }
    }
    if (out.length === before) throw new CopySourceError(copy.line, source, "not found in the build context, or excluded by .dockerignore");
  }
  return out;
}

// ---- RUN ----------------------------------------------------------------------------------

/**
 * What of a RUN command to run outside Docker. `npm cache clean --force` only keeps the npm
 * cache out of an image layer; run on a workstation or CI runner it would empty the shared
 * cache that `npm ci` reads, so it is left out (and reported). Everything else runs as written.
 */
export function localRunCommand(command: string): { command: string; skipped: string[] } {
  const parts = command.split("&&");
  const skipped = parts.filter((p) => /^\s*npm\s+cache\s+clean\b/.test(p)).map((p) => p.trim());
  return { command: parts.filter((p) => !/^\s*npm\s+cache\s+clean\b/.test(p)).join("&&").trim(), skipped };
}

/** The stage a `COPY --from` names, by index or by name (lower-cased, as parseCopy gives it). */
export function stageByRef(df: Dockerfile, ref: string): Stage | undefined {
  return /^\d+$/.test(ref) ? df.stages[Number(ref)] : df.stages.find((x) => x.name === ref);
}

/** The stages `s` copies from (`COPY --from`), in the order it names them. */
export function stageDeps(df: Dockerfile, s: Stage): Stage[] {
  const out: Stage[] = [];
  for (const i of s.instructions) {
    if (i.keyword !== "COPY") continue;
    const c = parseCopy(i);
    if (c.from === null) continue;
    const d = stageByRef(df, c.from);
    if (!d) throw new DockerfileError(`line ${c.line}: COPY --from=${c.from} names no stage of this Dockerfile (external images are not supported)`);
    if (!out.includes(d)) out.push(d);
  }
  return out;
}

/** The stages the last stage needs (through `COPY --from`), in Dockerfile order, the last one included; BuildKit builds only these. */
export function neededStages(df: Dockerfile): Stage[] {
  const need = new Set<number>();
  const visit = (s: Stage): void => {
    if (need.has(s.index)) return;
    need.add(s.index);
    if (df.stages.some((x) => x.name !== null && x.name === s.base.toLowerCase())) {
      throw new DockerfileError(`stage ${s.name ?? s.index}: FROM another stage is not supported by scripts/dockerfile.ts`);
    }
    for (const d of stageDeps(df, s)) visit(d);
  };
  visit(df.stages[df.stages.length - 1]);
  return df.stages.filter((s) => need.has(s.index));
}
