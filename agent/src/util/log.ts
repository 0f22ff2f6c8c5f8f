import pino, { type Logger, type DestinationStream } from "pino";

export type { Logger } from "pino";

/**
 * Paths pino blanks in every log line. Redis URLs can carry a password
 * (`rediss://:secret@host`), and auth tokens travel in config objects.
 */
export const REDACT_PATHS = [
  "redisUrl",
  "*.redisUrl",
  "config.redisUrl",
  "password",
  "*.password",
  "authToken",
  "*.authToken",
  "headers.authorization",
  "*.headers.authorization",
];

/** The agent's JSON logger: one line per event, secrets redacted. */
export function createLogger(opts: { level?: string; name?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      name: opts.name ?? "llm-ha",
      level: opts.level ?? process.env.LLMHA_LOG_LEVEL ?? "info",
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination ?? pino.destination({ fd: 1, sync: false }),
  );
}

/** Removes the password from a Redis URL so it can be shown to a person. */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "redacted";
    return u.toString();
  } catch {
    return "<unparseable url>";
  }
}
