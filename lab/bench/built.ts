/**
 * The compiled CLI the bench runs (what the image runs), only when it is newer than every source
 * it is built from: a `dist/` left from an older checkout would measure old code without a word.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { BUILT_CLI } from "../sim/sim-node";

const REPO = join(__dirname, "..", "..");

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (e.name.endsWith(".ts") || e.name.endsWith(".lua")) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/** `dist/agent/src/cli.js` when built after the last change to `agent/src` and `contracts/`; else null, saying why. */
export function builtCli(log: (l: string) => void): string | null {
  if (!existsSync(BUILT_CLI)) {
    log("no dist/ (npm run build): the agent runs from its sources with tsx");
    return null;
  }
  const sources = Math.max(newestSource(join(REPO, "agent", "src")), newestSource(join(REPO, "contracts")));
  if (statSync(BUILT_CLI).mtimeMs < sources) {
    log("dist/ is older than agent/src or contracts/ (npm run build): the agent runs from its sources with tsx");
    return null;
  }
  return BUILT_CLI;
}
