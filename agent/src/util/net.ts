import { connect, createServer, type NetConnectOpts } from "node:net";

/** A free TCP port on 127.0.0.1, chosen by the kernel. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error("no port assigned"))));
    });
  });
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Polls `check` every `everyMs` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  { timeoutMs = 10_000, everyMs = 25 }: { timeoutMs?: number; everyMs?: number } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const why = last instanceof Error ? `: ${last.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(everyMs);
  }
}

/** Thrown when a socket exchange does not finish in time. */
export class SocketTimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`${what} did not answer in ${ms} ms`);
    this.name = "SocketTimeoutError";
  }
}

/**
 * Connects (TCP or Unix socket), writes `payload` if any, and resolves with everything the
 * peer sent until it closed: an HAProxy agent-check reply, an admin-socket command.
 */
export function socketExchange(target: NetConnectOpts, payload: string | null, timeoutMs: number, what = "socket"): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(target);
    let out = "";
    const t = setTimeout(() => {
      sock.destroy();
      reject(new SocketTimeoutError(what, timeoutMs));
    }, timeoutMs);
    sock.setEncoding("utf8");
    if (payload !== null) sock.on("connect", () => sock.write(payload));
    sock.on("data", (d: string) => (out += d));
    sock.on("error", (e) => {
      clearTimeout(t);
      reject(e);
    });
    sock.on("close", () => {
      clearTimeout(t);
      resolve(out);
    });
  });
}
