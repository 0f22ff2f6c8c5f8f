/**
 * DCGM's quick diagnostic, `dcgmi diag -r 1 -j` (level 1: the deployment and software checks,
 * "normally lasting seconds"), run by the deep check before a node takes traffic.
 *
 * The JSON it prints (`-j`) has no published stable schema; what is read here follows DCGM 4's
 * diag schema (the DCGM repository's `testing/python3/dcgm_diag_schema.json`):
 * `{"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
 * [{"entity_group", "entity_id", "status", "warnings": [{"warning", "error_id", …}]}],
 * "test_summary": {"status"}}]}], "runtime_error"?}, "metadata": {"version", …}}`. The older
 * top-level key `DCGM GPU Diagnostic` and per-result `gpu_id`/`gpu_ids` are read too.
 * A result with status `Fail` is a failed test; `Pass`, `Skip`, `Warn` and `Not Run` are not.
 * The exit status is not trusted alone (it is non-zero both for failed tests and for a diag that
 * could not run): a `Fail` in the JSON is a failure, a clean JSON with exit 0 a pass, anything
 * else a diag that could not run.
 */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { runTool } from "../../util/run-tool";

export const DCGMI_DIAG_ARGS: readonly string[] = Object.freeze(["diag", "-r", "1", "-j"]);

/** One failed test: its name, the GPU (null when system-wide) and DCGM's first message. */
export interface DiagFailure {
  test: string;
  gpu: number | null;
  message: string;
}

export type DiagResult =
  | { kind: "passed"; tests: number }
  | { kind: "failed"; failures: DiagFailure[] }
  /** The diag did not run to a verdict: not found, timed out, no JSON, a runtime error. */
  | { kind: "error"; detail: string };

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Json) : null);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function gpuOf(r: Json): number | null {
  if (typeof r.entity_group === "string" && r.entity_group.toUpperCase() !== "GPU") return null;
  for (const k of ["entity_id", "gpu_id", "gpu_ids"]) {
    const v = r[k];
    if (typeof v === "number" && Number.isInteger(v)) return v;
    if (typeof v === "string" && /^\d+/.test(v)) return Number(/^\d+/.exec(v)![0]);
  }
  return null;
}

/** The verdict of one `dcgmi diag -j` run from its exit code and standard output. */
export function parseDiag(code: number | null, stdout: string): DiagResult {
  let doc: Json | null;
  try {
    doc = obj(JSON.parse(stdout));
  } catch {
    doc = null;
  }
  const diag = obj(doc?.["DCGM Diagnostic"]) ?? obj(doc?.["DCGM GPU Diagnostic"]);
  if (!diag) {
    const first = stdout.trim().split("\n")[0]?.slice(0, 120) ?? "";
    return { kind: "error", detail: `dcgmi diag exited ${code ?? "by a signal"} without its JSON result${first ? `: ${JSON.stringify(first)}` : ""}` };
  }
  const failures: DiagFailure[] = [];
  let tests = 0;
  for (const cat of arr(diag.test_categories)) {
    for (const t of arr(obj(cat)?.tests)) {
      const test = obj(t);
      if (!test) continue;
      tests += 1;
      const name = typeof test.name === "string" ? test.name : "unnamed test";
      let failedHere = false;
      for (const r of arr(test.results)) {
        const res = obj(r);
        if (!res || String(res.status).toLowerCase() !== "fail") continue;
        failedHere = true;
        const w = obj(arr(res.warnings)[0]);
        failures.push({ test: name, gpu: gpuOf(res), message: typeof w?.warning === "string" ? w.warning : "" });
      }
      if (!failedHere && String(obj(test.test_summary)?.status).toLowerCase() === "fail") failures.push({ test: name, gpu: null, message: "" });
    }
  }
  if (failures.length) return { kind: "failed", failures };
  if (typeof diag.runtime_error === "string" && diag.runtime_error) return { kind: "error", detail: `dcgmi diag could not run: ${diag.runtime_error.slice(0, 160)}` };
  if (code !== 0) return { kind: "error", detail: `dcgmi diag exited ${code ?? "by a signal"} with no failed test in its result` };
  return { kind: "passed", tests };
}

/** `GPU 3: software failed (page retirement pending)`, one line per failure, for the reason's detail. */
export function describeFailures(f: readonly DiagFailure[]): string {
  return f.map((x) => `${x.test} failed on ${x.gpu === null ? "the node" : `GPU ${x.gpu}`}${x.message ? ` (${x.message.slice(0, 120)})` : ""}`).join("; ");
}

/**
 * The executable `dcgmi` names: a path with a `/` as given, else the first match on `PATH`;
 * null when there is none or it is not executable.
 */
export function findExecutable(name: string, path = process.env.PATH ?? ""): string | null {
  const ok = (p: string): boolean => {
    try {
      accessSync(p, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (name.includes("/")) return ok(name) ? name : null;
  for (const dir of path.split(delimiter)) if (dir && ok(join(dir, name))) return join(dir, name);
  return null;
}

/**
 * Runs `dcgmi diag -r 1 -j` without a shell and with the minimal child environment, killed
 * after `timeoutMs` (util/run-tool.ts).
 */
export async function runDiag(path: string, timeoutMs: number): Promise<DiagResult> {
  const r = await runTool(path, DCGMI_DIAG_ARGS, timeoutMs);
  if (r.spawnError) return { kind: "error", detail: `dcgmi could not be started: ${r.spawnError.message}` };
  if (r.timedOut) return { kind: "error", detail: `dcgmi diag -r 1 did not finish within ${timeoutMs} ms` };
  return parseDiag(r.code, r.stdout);
}
