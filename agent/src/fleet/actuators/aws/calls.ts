/**
 * The plumbing every `aws` action runs through: `act` turns an action's body into an
 * `ActionResult` (errors become `failed`, the detail names each call made), and `call`
 * sends one API request with retries, counting every attempt in
 * `llmha_actuator_aws_calls_total`. Also the errors an action fails with.
 */
import { Counter, type Registry } from "prom-client";
import type { Logger } from "../../../util/log";
import { classifyError, errorName, withRetry, type RetrySettings } from "../retry";
import type { ActionName, ActionOutcome, ActionResult, WakeReport } from "../types";

export const AWS_CALLS_METRIC = "llmha_actuator_aws_calls_total";

export const AWS_OPERATIONS = [
  "DescribeAutoScalingGroups",
  "CreateOrUpdateTags",
  "SuspendProcesses",
  "UpdateAutoScalingGroup",
  "ResumeProcesses",
  "DeleteTags",
  "DescribeScheduledActions",
  "DescribeScalingActivities",
  "GetManagedResource",
  "ListZonalShifts",
  "StartZonalShift",
  "UpdateZonalShift",
  "CancelZonalShift",
  "DescribeCapacityReservations",
] as const;
export type AwsOperation = (typeof AWS_OPERATIONS)[number];

/** An API call that failed for good (not retryable, or out of attempts); `cause` is the SDK's error. */
export class AwsCallError extends Error {
  constructor(
    readonly operation: AwsOperation,
    readonly attempts: number,
    cause: unknown,
  ) {
    super(`${operation} failed after ${attempts} attempt${attempts > 1 ? "s" : ""}: ${errorName(cause)}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "AwsCallError";
  }
}

/** What an action cannot start without (no groups, no resources, unknown AZ id): `failed`, no call made. */
export class MissingIdentifierError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MissingIdentifierError";
  }
}

/** What an action's body decides; `act` adds the action, AZ, call count and timing. */
export interface ActionBody {
  outcome: ActionOutcome;
  detail: string;
  /** A followed wake's report (`standby.wake`). */
  wake?: WakeReport;
}

/** Calls made by one action, with what each returned. */
export class CallTrace {
  count = 0;
  readonly lines: string[] = [];

  summary(): string {
    return this.lines.length ? `calls: ${this.lines.join(", ")}` : "no calls";
  }
}

/** The part of `AwsActuatorOptions` the calls read (the actuator passes its options as they are). */
export interface AwsCallsOptions {
  /** Default `DEFAULT_RETRY` (4 attempts, 200 ms base, 5 s cap). */
  retry?: Partial<RetrySettings>;
  /** Registry for `llmha_actuator_aws_calls_total`. Default none. */
  registry?: Registry;
}

/** Runs actions and their API calls for one `AwsActuator`; the standby and shift actions share it. */
export class AwsCalls {
  private readonly apiCalls?: Counter<"operation" | "result">;

  constructor(
    private readonly o: AwsCallsOptions,
    /** The actuator's logger (component `actuator-aws`). */
    private readonly log: Logger,
  ) {
    if (o.registry) {
      // One series set per registry, shared by every actuator built on it.
      const existing = o.registry.getSingleMetric(AWS_CALLS_METRIC) as Counter<"operation" | "result"> | undefined;
      this.apiCalls = existing ?? new Counter({
        name: AWS_CALLS_METRIC,
        help: "AWS API requests the actuator sent, retries included, by result (ok, throttled, error)",
        labelNames: ["operation", "result"],
        registers: [o.registry],
      });
      for (const operation of AWS_OPERATIONS) for (const result of ["ok", "throttled", "error"]) this.apiCalls.inc({ operation, result }, 0);
    }
  }

  /** Runs one action: errors become `failed`; every result names the calls it made. */
  async act(action: ActionName, az: string, body: (trace: CallTrace) => Promise<ActionBody>): Promise<ActionResult> {
    const started = performance.now();
    const trace = new CallTrace();
    let outcome: ActionOutcome;
    let detail: string;
    let wake: WakeReport | undefined;
    try {
      ({ outcome, detail, wake } = await body(trace));
    } catch (err) {
      outcome = "failed";
      detail = err instanceof Error ? err.message : String(err);
    }
    return { action, az, outcome, calls: trace.count, detail: `${detail} [${trace.summary()}]`, durationMs: performance.now() - started, ...(wake ? { wake } : {}) };
  }

  /** One API call with retries; each attempt is counted, logged at debug and recorded in the trace. */
  async call<T>(trace: CallTrace, op: AwsOperation, send: () => Promise<T>): Promise<T> {
    const failures: string[] = [];
    try {
      const out = await withRetry(send, {
        settings: this.o.retry,
        onAttempt: (a) => {
          trace.count++;
          const result = a.error === null ? "ok" : classifyError(a.error) === "throttled" ? "throttled" : "error";
          this.apiCalls?.inc({ operation: op, result });
          if (a.error !== null) {
            failures.push(errorName(a.error));
            this.log.debug({ operation: op, attempt: a.attempt, err: errorName(a.error), retrying: a.retrying, delayMs: a.delayMs }, "aws call failed");
          } else {
            this.log.debug({ operation: op, attempt: a.attempt }, "aws call ok");
          }
        },
      });
      trace.lines.push(`${op} ${[...failures, "ok"].join("→")}`);
      return out;
    } catch (err) {
      trace.lines.push(`${op} ${failures.join("→")}`);
      throw new AwsCallError(op, failures.length, err);
    }
  }
}
