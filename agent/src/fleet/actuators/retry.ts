/**
 * Bounded retries with capped exponential backoff and full jitter for cloud API calls.
 *
 * Only throttling and server-side trouble is retried (the request may succeed a moment
 * later); a validation or permission error fails at once, because asking again cannot
 * change the answer and would only delay the controller's next period. The SDK clients
 * the actuators build are created with `maxAttempts: 1`, so every attempt goes through
 * here and is counted: `ActionResult.calls` is the number of requests actually sent.
 */

export interface RetrySettings {
  /** Attempts per call, the first included. Default 4. */
  attempts: number;
  /** Backoff before the second attempt; doubles each time (full jitter). Default 200 ms. */
  baseMs: number;
  /** Upper bound of one backoff. Default 5000 ms. */
  maxMs: number;
}

export const DEFAULT_RETRY: Readonly<RetrySettings> = Object.freeze({ attempts: 4, baseMs: 200, maxMs: 5000 });

export class RetrySettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RetrySettingsError";
  }
}

export function resolveRetrySettings(s: Partial<RetrySettings> = {}): Readonly<RetrySettings> {
  const r = { ...DEFAULT_RETRY, ...s };
  if (!Number.isInteger(r.attempts) || r.attempts < 1) throw new RetrySettingsError(`attempts must be an integer ≥ 1, got ${r.attempts}`);
  if (!(r.baseMs >= 0) || !(r.maxMs >= r.baseMs)) throw new RetrySettingsError(`need 0 ≤ baseMs ≤ maxMs, got ${r.baseMs} and ${r.maxMs}`);
  return Object.freeze(r);
}

/** Error names AWS services use for "slow down" (Query APIs: `Throttling`; JSON/REST: `ThrottlingException`). */
export const THROTTLING_ERRORS: ReadonlySet<string> = new Set([
  "Throttling",
  "ThrottlingException",
  "ThrottledException",
  "RequestThrottled",
  "RequestThrottledException",
  "RequestLimitExceeded",
  "TooManyRequestsException",
  "SlowDown",
]);

/** Transport failures worth another attempt. */
const TRANSIENT_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EPIPE", "EAI_AGAIN", "ENOTFOUND", "ECONNABORTED"]);

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  $fault?: unknown;
  $metadata?: { httpStatusCode?: unknown };
  $retryable?: unknown;
}

/** `throttled` and `transient` errors are retried; `fatal` ones fail at once. */
export type ErrorClass = "throttled" | "transient" | "fatal";

export function classifyError(err: unknown): ErrorClass {
  const e = (typeof err === "object" && err !== null ? err : {}) as ErrorLike;
  const name = typeof e.name === "string" ? e.name : "";
  if (THROTTLING_ERRORS.has(name)) return "throttled";
  const status = e.$metadata?.httpStatusCode;
  if (status === 429) return "throttled";
  if (typeof status === "number" && status >= 500) return "transient";
  if (e.$fault === "server") return "transient";
  if (name === "TimeoutError" || name === "RequestTimeout" || name === "RequestTimeoutException") return "transient";
  if (typeof e.code === "string" && TRANSIENT_CODES.has(e.code)) return "transient";
  return "fatal";
}

export function isRetryable(err: unknown): boolean {
  return classifyError(err) !== "fatal";
}

/** Short name of an error for details and logs: `ThrottlingException`, `ValidationError`. */
export function errorName(err: unknown): string {
  if (err instanceof Error) return err.name && err.name !== "Error" ? err.name : err.message.split("\n")[0].slice(0, 80);
  return String(err).slice(0, 80);
}

export interface AttemptRecord {
  attempt: number;
  /** Null when the attempt succeeded. */
  error: unknown;
  /** Whether another attempt follows. */
  retrying: boolean;
  /** Backoff before the next attempt (0 when none follows). */
  delayMs: number;
}

export interface RetryOptions {
  settings?: Partial<RetrySettings>;
  /** Called after every attempt, successful or not (counting, metrics, logs). */
  onAttempt?: (r: AttemptRecord) => void;
  /** Aborts the backoff wait and gives up with the signal's reason. */
  signal?: AbortSignal;
  /** Source of jitter in [0, 1). Default `Math.random`. */
  random?: () => number;
}

/** Backoff before attempt `attempt + 1`: uniform in [0, min(maxMs, baseMs · 2^(attempt − 1))]. */
export function backoffMs(attempt: number, s: RetrySettings, random: () => number = Math.random): number {
  const cap = Math.min(s.maxMs, s.baseMs * 2 ** (attempt - 1));
  return Math.round(random() * cap);
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Runs `call` until it succeeds, fails with a non-retryable error, or runs out of attempts (the last error is thrown). */
export async function withRetry<T>(call: () => Promise<T>, o: RetryOptions = {}): Promise<T> {
  const s = resolveRetrySettings(o.settings);
  for (let attempt = 1; ; attempt++) {
    try {
      const out = await call();
      o.onAttempt?.({ attempt, error: null, retrying: false, delayMs: 0 });
      return out;
    } catch (err) {
      const retrying = attempt < s.attempts && isRetryable(err);
      const delayMs = retrying ? backoffMs(attempt, s, o.random) : 0;
      o.onAttempt?.({ attempt, error: err, retrying, delayMs });
      if (!retrying) throw err;
      await wait(delayMs, o.signal);
    }
  }
}
