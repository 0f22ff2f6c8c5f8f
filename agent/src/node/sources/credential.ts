import { readFileSync, statSync } from "node:fs";
import type { Logger } from "../../util/log";
import type { AuthHeaders } from "./inference";

/**
 * The inference server's API key as the agent sends it: `Authorization: Bearer <key>` on the
 * model check, the probe and the engine metrics (vLLM `--api-key` guards every `/v1` route).
 * The key lives in a file (`LLMHA_INFERENCE_API_KEY_FILE`, a mounted Secret), never in argv
 * or the environment, and is never logged or shown. The file is re-read when it changes
 * (checked with a `stat` before each request): Kubernetes updates a mounted Secret by swapping
 * a symlink, so a rotated key takes effect within one period, without a restart.
 */

/** Key text a header can carry: printable ASCII, no spaces (a stray newline is trimmed first). */
const KEY_RE = /^[\x21-\x7e]+$/;

/** Why a key file cannot be used; names the file, never the content. */
export function keyFileProblem(file: string): string | null {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    return `cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
  const key = text.trim();
  if (key === "") return `${file} is empty`;
  if (!KEY_RE.test(key)) return `${file} must hold one key of printable characters without spaces`;
  return null;
}

/**
 * `http://user:pass@host:8000` → the URL without its user part, and the matching Basic
 * `Authorization` value: the password then never reaches a reason, `/readyz`, `/status` or a log.
 */
export function splitUserinfo(url: string): { url: string; basic: string | null } {
  const u = new URL(url);
  if (!u.username && !u.password) return { url, basic: null };
  const basic = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString("base64")}`;
  u.username = "";
  u.password = "";
  return { url: u.toString().replace(/\/+$/, ""), basic };
}

export class InferenceCredential {
  private stamp = "";
  private key: string | null = null;
  private warned = false;

  /** `file`: the key file, or null; `basic`: credentials from the URL's user part, used when there is no key file. */
  constructor(
    private readonly file: string | null,
    private readonly basic: string | null,
    private readonly log: Logger,
  ) {}

  /** The headers for the next request: the current key, re-read if the file changed. */
  headers(): AuthHeaders {
    if (this.file === null) return this.basic ? { authorization: this.basic } : {};
    this.refresh(this.file);
    return this.key !== null ? { authorization: `Bearer ${this.key}` } : {};
  }

  private refresh(file: string): void {
    let stamp: string;
    try {
      const st = statSync(file);
      stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch (err) {
      this.warnOnce(file, (err as NodeJS.ErrnoException).code ?? (err as Error).message);
      return;
    }
    if (stamp === this.stamp) return;
    const problem = keyFileProblem(file);
    if (problem) {
      // Keep the last good key: a Secret half-way through an update must not take the node out.
      this.warnOnce(file, problem);
      return;
    }
    const first = this.stamp === "";
    this.stamp = stamp;
    this.key = readFileSync(file, "utf8").trim();
    this.warned = false;
    this.log.info({ event: "inference-key", file }, first ? `inference API key read from ${file}` : `inference API key changed in ${file}: re-read`);
  }

  private warnOnce(file: string, problem: string): void {
    if (this.warned) return;
    this.warned = true;
    this.log.warn({ event: "inference-key-unreadable", file }, `inference API key file ${file}: ${problem}; keeping the last key read`);
  }
}
