import { connect, createServer, type NetConnectOpts } from "node:net";

/** A free TCP port on 127.0.0.1, chosen by the kernel. */
/**
 * Ports handed out below Linux's ephemeral range (32768–60999 by default): a port the kernel
 * picks for `listen(0)` is also what it picks for outgoing connections, so between our probe
 * and the real bind a client socket (thousands in a drill) could take it.
 */
const PORT_LOW = 20_000;
const PORT_HIGH = 32_767;
const handedOut = new Set<number>();

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** A loopback TCP port nothing listens on now, not handed out before by this process. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = PORT_LOW + Math.floor(Math.random() * (PORT_HIGH - PORT_LOW + 1));
    if (handedOut.has(port)) continue;
    if (await canBind(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free loopback port in ${PORT_LOW}-${PORT_HIGH} after 200 tries`);
}

/**
 * `p`'s outcome, or after `ms` the rejection `late()` makes (undefined when no `late` is given),
 * whichever comes first. The timer ends with the race: a `Promise.race` with a bare `sleep`
 * left it pending and kept a finished process alive until it fired.
 */
export async function within<T>(p: Promise<T>, ms: number, late?: () => Error): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<undefined>((resolve, reject) => {
    timer = setTimeout(() => (late ? reject(late()) : resolve(undefined)), ms);
  });
  try {
    return await Promise.race([p, timedOut]);
  } finally {
    clearTimeout(timer);
  }
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

/** Closes an HTTP server now: its open (keep-alive) connections dropped, resolved once it stopped listening. */
export async function closeHttpServer(s: import("node:http").Server | null): Promise<void> {
  if (!s) return;
  s.closeAllConnections();
  await new Promise<void>((r) => s.close(() => r()));
}

/**
 * A listener that could not be opened, named by the setting that chose its address: the message
 * (`LLMHA_…: cannot listen on ADDRESS (EADDRINUSE)`) is all a user needs, so a command prints it
 * as one line and exits 1, without a stack trace.
 */
export class ListenError extends Error {
  constructor(
    readonly setting: string,
    where: string,
    cause: NodeJS.ErrnoException,
  ) {
    super(`${setting}: cannot listen on ${where} (${cause.code ?? cause.message})`);
    this.name = "ListenError";
  }
}

/**
 * Starts `s` listening on `at` (a port or a Unix socket; `where` names it in an error). A failure
 * rejects with a `ListenError` naming `setting` when given, else with the error itself.
 */
export function listenOn(s: import("node:net").Server, at: import("node:net").ListenOptions, where: string, setting?: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    s.once("error", (err: NodeJS.ErrnoException) => reject(setting ? new ListenError(setting, where, err) : err));
    s.listen(at, () => resolve());
  });
}

/**
 * Starts `s` listening on a port; resolves with the port it got (useful with port 0). A failure
 * as `listenOn`. `exclusive`: in a cluster worker, a listener of the worker's own rather than one
 * shared through the primary.
 */
export async function listenHttp(s: import("node:net").Server, port: number, host: string, o: { setting?: string; exclusive?: boolean } = {}): Promise<number> {
  await listenOn(s, { port, host, exclusive: o.exclusive ?? false }, `${host}:${port}`, o.setting);
  const a = s.address();
  return typeof a === "object" && a ? a.port : port;
}
