/**
 * A directory under the OS's temporary folder for the test that asks for it, removed when that
 * test finishes, passed or failed. Call it from inside a test (or a helper a test calls): the
 * removal is the test's `onTestFinished`. Whatever the test started that writes into the
 * directory must be stopped within the test (or its own `onTestFinished`, registered after this
 * one: they run last registered first).
 *
 * `keepOnFailure`: a failed test leaves the directory for a person to read (a drill's report and
 * its processes' logs), naming it on stderr; a passed one removes it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onTestFinished } from "vitest";

export function testTempDir(prefix: string, opts: { keepOnFailure?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(({ task }) => {
    if (opts.keepOnFailure && task.result?.state === "fail") {
      process.stderr.write(`${task.name}: failed; its files are kept in ${dir}\n`);
      return;
    }
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}
