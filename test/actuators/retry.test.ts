import { describe, expect, it } from "vitest";
import { backoffMs, classifyError, DEFAULT_RETRY, resolveRetrySettings, RetrySettingsError, withRetry } from "../../agent/src/fleet/actuators/retry";

const err = (name: string, extra: object = {}) => Object.assign(new Error(name), { name, ...extra });

describe("retry", () => {
  it("retries throttling and server trouble, not client mistakes", () => {
    for (const n of ["Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"]) expect(classifyError(err(n))).toBe("throttled");
    expect(classifyError(err("Whatever", { $metadata: { httpStatusCode: 429 } }))).toBe("throttled");
    expect(classifyError(err("InternalFailure", { $metadata: { httpStatusCode: 503 } }))).toBe("transient");
    expect(classifyError(err("TimeoutError"))).toBe("transient");
    expect(classifyError(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }))).toBe("transient");
    for (const n of ["ValidationError", "AccessDenied", "ValidationException", "ResourceNotFoundException"]) {
      expect(classifyError(err(n, { $fault: "client", $metadata: { httpStatusCode: 400 } }))).toBe("fatal");
    }
  });

  it("backs off with full jitter under a doubling cap", () => {
    const s = { attempts: 6, baseMs: 100, maxMs: 1000 };
    expect([1, 2, 3, 4, 5].map((a) => backoffMs(a, s, () => 0.999999))).toEqual([100, 200, 400, 800, 1000]);
    expect(backoffMs(3, s, () => 0)).toBe(0);
  });

  it("stops after `attempts` and rethrows the last error; a fatal error is not retried", async () => {
    let n = 0;
    const calls: boolean[] = [];
    await expect(
      withRetry(async () => { n++; throw err("Throttling"); }, { settings: { attempts: 3, baseMs: 1, maxMs: 1 }, onAttempt: (a) => calls.push(a.retrying) }),
    ).rejects.toMatchObject({ name: "Throttling" });
    expect(n).toBe(3);
    expect(calls).toEqual([true, true, false]);
    n = 0;
    await expect(withRetry(async () => { n++; throw err("ValidationError"); }, { settings: { attempts: 3, baseMs: 1, maxMs: 1 } })).rejects.toThrow("ValidationError");
    expect(n).toBe(1);
  });

  it("validates its settings", () => {
    expect(resolveRetrySettings()).toEqual(DEFAULT_RETRY);
    expect(() => resolveRetrySettings({ attempts: 0 })).toThrow(RetrySettingsError);
    expect(() => resolveRetrySettings({ baseMs: 10, maxMs: 5 })).toThrow("need 0 ≤ baseMs ≤ maxMs, got 10 and 5");
  });
});
