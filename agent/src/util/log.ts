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

/**
 * A URL as it may be shown to a person or logged: the password replaced, and a user part
 * with no password replaced too — `redis://TOKEN@host` (redis-cli takes the password
 * there) and `http://TOKEN@host` carry the secret in the user name. `user:pass@` keeps the
 * user name, which is not a secret and tells which account is used.
 */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "redacted";
    else if (u.username) u.username = "redacted";
    return u.toString();
  } catch {
    return maskUserinfo(url);
  }
}

/** Text with anything between `//` and `@` (a URL's user part) masked: for values that are not URLs yet. */
export function maskUserinfo(text: string): string {
  return text.replace(/\/\/[^/@\s]*@/g, "//redacted@");
}
