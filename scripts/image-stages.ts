/**
 * Building agent/Dockerfile's stages for `npm run image:check`: each stage's context files
 * copied into a temp folder standing for its file system, its RUN commands run there, and
 * the checks on the final layout (the packages the compiled code requires, sizes).
 */
import { readFileSync, readdirSync } from "node:fs";
import { copyFile, cp, lstat, mkdir, readlink, symlink } from "node:fs/promises";
import { builtinModules } from "node:module";
import { dirname, join, posix } from "node:path";
import { DockerfileError, REPO, jsonForm, localRunCommand, parseAssignments, parseCopy, resolveCopy, stageByRef, substitute, type Dockerfile, type Stage } from "./dockerfile";
import type { IgnorePattern } from "./dockerignore";
import { ImageCheckError, log, runCommand, runEnv, tempDir } from "./image-run";

// ---- building the stages ------------------------------------------------------------------

export interface BuiltStage {
  readonly stage: Stage;
  /** Temp folder standing for the stage's `/`. */
  readonly root: string;
  /** WORKDIR at the end of the stage (a path inside the image). */
  workdir: string;
  env: Record<string, string>;
  user: string | null;
  entrypoint: string[] | null;
  cmd: string[] | null;
  /** Seconds spent on it. */
  seconds: number;
}

export function stageLabel(s: Stage): string {
  return s.name ?? `stage-${s.index}`;
}

/** Where an image path lands in the stage's temp folder. */
export function hostPath(root: string, imagePath: string): string {
  return join(root, ...posix.resolve("/", imagePath).split("/").filter(Boolean));
}

async function copyEntry(from: string, to: string): Promise<void> {
  await mkdir(dirname(to), { recursive: true });
  const st = await lstat(from);
  if (st.isSymbolicLink()) await symlink(await readlink(from), to);
  else await copyFile(from, to); // copyFile keeps the mode: bin/llm-ha stays executable.
}

/** `COPY --from=<stage> <src>… <dest>`: sources are paths in that stage's file system. */
async function copyFromStage(src: BuiltStage, sources: readonly string[], dest: string, into: BuiltStage, line: number): Promise<void> {
  const destIsDir = dest.endsWith("/") || sources.length > 1;
  const destPath = hostPath(into.root, posix.resolve(into.workdir, dest));
  for (const s of sources) {
    const from = hostPath(src.root, posix.resolve("/", s));
    let st;
    try {
      st = await lstat(from);
    } catch {
      throw new ImageCheckError(`line ${line}: COPY --from=${stageLabel(src.stage)} ${s}: not found in that stage`);
    }
    // A folder's contents go into the destination, as in Docker; verbatimSymlinks keeps node_modules/.bin links relative.
    if (st.isDirectory()) await cp(from, destPath, { recursive: true, verbatimSymlinks: true, force: true });
    else await copyEntry(from, destIsDir ? join(destPath, posix.basename(s)) : destPath);
  }
}

export async function buildStage(df: Dockerfile, stage: Stage, built: ReadonlyMap<number, BuiltStage>, patterns: readonly IgnorePattern[]): Promise<BuiltStage> {
  const started = Date.now();
  const b: BuiltStage = { stage, root: await tempDir(stageLabel(stage)), workdir: "/", env: {}, user: null, entrypoint: null, cmd: null, seconds: 0 };
  const label = stageLabel(stage);
  // Stages with nothing between them build at once, as BuildKit builds them: each line names its stage.
  const say = (line: string): void => log(`${label}: ${line}`);
  say(`FROM ${stage.base} in ${b.root}`);
  // ARG and ENV values, for substitution in later instructions and for RUN's environment.
  const args: Record<string, string> = {};
  const vars = (): Record<string, string> => ({ ...args, ...b.env });
  const byRef = (ref: string): BuiltStage | undefined => {
    const s = stageByRef(df, ref);
    return s && built.get(s.index);
  };
  for (const ins of stage.instructions) {
    const where = `line ${ins.line}: ${ins.keyword} ${ins.args}`;
    switch (ins.keyword) {
      case "WORKDIR":
        b.workdir = posix.resolve(b.workdir, substitute(ins.args.trim(), vars()));
        await mkdir(hostPath(b.root, b.workdir), { recursive: true });
        break;
      case "ARG":
        for (const [k, v] of Object.entries(parseAssignments(ins.args, "ARG", ins.line))) args[k] = v || (df.globalArgs[k] ?? "");
        break;
      case "ENV":
        for (const [k, v] of Object.entries(parseAssignments(ins.args, "ENV", ins.line))) b.env[k] = substitute(v, vars());
        break;
      case "COPY": {
        const c = parseCopy(ins, vars());
        if (c.from !== null) {
          const src = byRef(c.from);
          if (!src) throw new DockerfileError(`line ${ins.line}: COPY --from=${c.from}: stage not built`);
          await copyFromStage(src, c.sources, c.dest, b, ins.line);
          say(where);
        } else {
          const files = resolveCopy(c, REPO, patterns, b.workdir);
          for (const f of files) await copyEntry(join(REPO, f.src), hostPath(b.root, f.dest));
          say(`${where}  (${files.length} file${files.length === 1 ? "" : "s"})`);
        }
        break;
      }
      case "RUN": {
        const json = jsonForm(ins.args, ins.line);
        const { command, skipped } = json ? { command: "", skipped: [] } : localRunCommand(ins.args);
        for (const s of skipped) say(`(not run here: ${s}: it would empty this machine's npm cache; it only keeps the cache out of the layer)`);
        const argv = json ?? ["/bin/sh", "-c", command];
        const t = Date.now();
        say(`line ${ins.line}: RUN ${json ? JSON.stringify(json) : command}`);
        await runCommand(argv, hostPath(b.root, b.workdir), runEnv(vars()), `stage ${label}, Dockerfile line ${ins.line}: RUN`);
        say(`  done in ${((Date.now() - t) / 1000).toFixed(1)} s`);
        break;
      }
      case "USER":
        b.user = substitute(ins.args.trim(), vars());
        break;
      case "ENTRYPOINT":
      case "CMD": {
        const v = jsonForm(ins.args, ins.line) ?? ["/bin/sh", "-c", ins.args];
        if (ins.keyword === "ENTRYPOINT") {
          b.entrypoint = v;
          b.cmd = null; // Docker: a new ENTRYPOINT resets CMD inherited so far.
        } else {
          b.cmd = v;
        }
        break;
      }
      case "EXPOSE":
      case "LABEL":
      case "STOPSIGNAL":
        // Metadata only: nothing to build or run.
        break;
      default:
        throw new DockerfileError(`line ${ins.line}: ${ins.keyword} is not supported by scripts/image-check.ts`);
    }
  }
  b.seconds = (Date.now() - started) / 1000;
  say(`built in ${b.seconds.toFixed(1)} s`);
  return b;
}

// ---- checks on the final layout -----------------------------------------------------------

/**
 * The npm packages the compiled code names (`require("x")`, `import("x")`), node builtins
 * left out. The agent started below loads only part of the code (no Redis, no AWS), so a
 * package missing from the runtime node_modules would otherwise show only on a real node.
 */
export function requiredPackages(distDir: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const rel of readdirSync(distDir, { recursive: true, encoding: "utf8" })) {
    if (!rel.endsWith(".js")) continue;
    for (const m of readFileSync(join(distDir, rel), "utf8").matchAll(/\b(?:require|import)\(\s*["']([^"'./][^"']*)["']\s*\)/g)) {
      const spec = m[1];
      if (spec.startsWith("node:")) continue;
      const parts = spec.split("/");
      const pkg = spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
      if (!found.has(pkg)) found.set(pkg, rel);
    }
  }
  return found;
}

export const BUILTINS = new Set(builtinModules);

export async function duMiB(path: string): Promise<number> {
  const out = await runCommand(["du", "-sk", path], REPO, process.env, `du -sk ${path}`);
  return Number(out.trim().split(/\s+/)[0]) / 1024;
}

/** The biggest packages of a node_modules folder (scoped ones counted per package), for the report. */
export async function biggestPackages(nodeModules: string, n: number): Promise<string> {
  const out = await runCommand(["/bin/sh", "-c", "du -sk ./[!@.]* ./@*/* 2>/dev/null | sort -rn | head -n " + n], nodeModules, process.env, "du node_modules");
  return out
    .trim()
    .split("\n")
    .map((l) => {
      const [kb, name] = l.split(/\s+/);
      return `${name.replace(/^\.\//, "")} ${(Number(kb) / 1024).toFixed(1)} MiB`;
    })
    .join(", ");
}
