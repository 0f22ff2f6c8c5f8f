/**
 * Provider failover: an ordered list of external OpenAI-compatible upstreams, tried by
 * priority, each with its own timeout and circuit breaker. Keys come from a file or an
 * environment variable and never appear in a log line, an error or `toJSON()`.
 */
import { readFileSync } from "node:fs";

export class ProviderConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProviderConfigError";
  }
}

export interface ProviderSpec {
  name: string;
  /** Base URL up to and including `/v1`, e.g. `https://api.example.com/v1`. */
  url: string;
  /** Lower is tried first. Default: the order in the list. */
  priority?: number;
  /** Time to the response headers (a stream may then run on). Default 10000 ms. */
  timeoutMs?: number;
  /** Our model id → the upstream's. A model not listed is not sent to this provider (unless `"*"` is). */
  models: Record<string, string>;
  /** File holding the API key (a mounted secret). */
  keyFile?: string;
  /** Environment variable holding the API key. */
  keyEnv?: string;
  /** Consecutive failures that open the breaker. Default 3. */
  failureThreshold?: number;
  /** How long an open breaker refuses before one trial request. Default 30000 ms. */
  openMs?: number;
}

/** A circuit breaker: closed → open after N consecutive failures → half-open (one trial) after `openMs`. */
export class CircuitBreaker {
  private failures = 0;
  private openedAt: number | null = null;
  private trialInFlight = false;

  constructor(readonly threshold: number, readonly openMs: number, private readonly now: () => number = Date.now) {}

  get state(): "closed" | "open" | "half-open" {
    if (this.openedAt === null) return "closed";
    return this.now() - this.openedAt >= this.openMs ? "half-open" : "open";
  }

  /** True when a request may go; in half-open only one trial at a time. */
  tryAcquire(): boolean {
    const s = this.state;
    if (s === "closed") return true;
    if (s === "open" || this.trialInFlight) return false;
    this.trialInFlight = true;
    return true;
  }

  success(): void {
    this.failures = 0;
    this.openedAt = null;
    this.trialInFlight = false;
  }

  failure(): void {
    this.trialInFlight = false;
    this.failures += 1;
    if (this.openedAt !== null || this.failures >= this.threshold) this.openedAt = this.now();
  }
}

export class Provider {
  readonly name: string;
  readonly url: string;
  readonly priority: number;
  readonly timeoutMs: number;
  readonly models: Readonly<Record<string, string>>;
  readonly breaker: CircuitBreaker;
  /** Its last answer was 401, 403 or 404 (the key, its permissions or the model mapping is wrong). */
  misconfigured = false;
  readonly #key: string | null;

  constructor(spec: ProviderSpec, index: number, env: NodeJS.ProcessEnv = process.env) {
    if (!spec || typeof spec.name !== "string" || !/^[A-Za-z0-9_.-]+$/.test(spec.name)) throw new ProviderConfigError(`provider #${index + 1}: \`name\` must match [A-Za-z0-9_.-]+`);
    let u: URL;
    try {
      u = new URL(spec.url);
    } catch {
      throw new ProviderConfigError(`provider ${spec.name}: \`url\` is not a URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new ProviderConfigError(`provider ${spec.name}: \`url\` must be http(s)`);
    if (u.username || u.password) throw new ProviderConfigError(`provider ${spec.name}: put the key in keyFile or keyEnv, not in the URL`);
    if (typeof spec.models !== "object" || spec.models === null || Object.keys(spec.models).length === 0) throw new ProviderConfigError(`provider ${spec.name}: \`models\` must map at least one model`);
    this.name = spec.name;
    this.url = spec.url.replace(/\/+$/, "");
    this.priority = spec.priority ?? index;
    this.timeoutMs = spec.timeoutMs ?? 10_000;
    if (!(this.timeoutMs > 0)) throw new ProviderConfigError(`provider ${spec.name}: timeoutMs must be > 0`);
    this.models = { ...spec.models };
    this.breaker = new CircuitBreaker(spec.failureThreshold ?? 3, spec.openMs ?? 30_000);
    if (spec.keyFile) {
      try {
        this.#key = readFileSync(spec.keyFile, "utf8").trim();
      } catch (err) {
        throw new ProviderConfigError(`provider ${spec.name}: cannot read keyFile ${spec.keyFile}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
      }
    } else if (spec.keyEnv) {
      const v = env[spec.keyEnv];
      if (!v) throw new ProviderConfigError(`provider ${spec.name}: environment variable ${spec.keyEnv} (keyEnv) is not set`);
      this.#key = v.trim();
    } else {
      this.#key = null;
    }
  }

  /** The upstream's model id for ours, or null when this provider does not serve it. */
  upstreamModel(model: string): string | null {
    return this.models[model] ?? (this.models["*"] === "*" ? model : (this.models["*"] ?? null));
  }

  get hasKey(): boolean {
    return this.#key !== null;
  }

  /** Headers for a request (the key only here). */
  headers(): Record<string, string> {
    const h: Record<string, string> = { "content-type": "application/json" };
    if (this.#key) h.authorization = `Bearer ${this.#key}`;
    return h;
  }

  toJSON(): Record<string, unknown> {
    return { name: this.name, url: this.url, priority: this.priority, timeoutMs: this.timeoutMs, models: this.models, key: this.#key ? "(set)" : "(none)", breaker: this.breaker.state };
  }
}

/** Parses the providers file (a JSON array of `ProviderSpec`) and sorts by priority. */
export function loadProviders(json: string, env: NodeJS.ProcessEnv = process.env): Provider[] {
  let specs: unknown;
  try {
    specs = JSON.parse(json);
  } catch (err) {
    throw new ProviderConfigError(`providers: not JSON (${(err as Error).message})`);
  }
  if (!Array.isArray(specs)) throw new ProviderConfigError("providers: must be a JSON array");
  const list = specs.map((s, i) => new Provider(s as ProviderSpec, i, env));
  const names = new Set<string>();
  for (const p of list) {
    if (names.has(p.name)) throw new ProviderConfigError(`providers: ${p.name} is listed twice`);
    names.add(p.name);
  }
  return list.sort((a, b) => a.priority - b.priority);
}

export type UpstreamOutcome =
  | { ok: true; provider: Provider; response: Response }
  | { ok: false; tried: Array<{ provider: string; reason: string }> };

/** 5xx, 408 and 429 count against a provider (and move on to the next); other 4xx are the client's and are answered as is. */
function isProviderFailure(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

/**
 * 401/403 (the key is wrong or lacks the model) and 404 (the mapped model or the URL does not
 * exist there) are our configuration, not the client's request: the next provider is tried, and
 * the upstream body (it may quote the key) never reaches the client.
 */
function isMisconfiguration(status: number): boolean {
  return status === 401 || status === 403 || status === 404;
}

/**
 * Sends the request to the first provider (by priority) that serves the model, whose breaker
 * lets it through and that answers in time; the next one on a failure.
 */
export async function forwardToProviders(
  providers: readonly Provider[],
  path: "/chat/completions" | "/completions",
  body: Record<string, unknown>,
  onAttempt?: (provider: string, result: string) => void,
): Promise<UpstreamOutcome> {
  const tried: Array<{ provider: string; reason: string }> = [];
  const model = String(body.model);
  for (const p of providers) {
    const upstream = p.upstreamModel(model);
    if (upstream === null) continue;
    if (!p.breaker.tryAcquire()) {
      tried.push({ provider: p.name, reason: "circuit open" });
      onAttempt?.(p.name, "circuit_open");
      continue;
    }
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), p.timeoutMs);
    try {
      const res = await fetch(p.url + path, { method: "POST", headers: p.headers(), body: JSON.stringify({ ...body, model: upstream }), signal: ac.signal });
      clearTimeout(timer);
      if (isProviderFailure(res.status) || isMisconfiguration(res.status)) {
        const misconfigured = isMisconfiguration(res.status);
        p.breaker.failure();
        p.misconfigured = misconfigured;
        await res.body?.cancel().catch(() => undefined);
        tried.push({ provider: p.name, reason: `HTTP ${res.status}${misconfigured ? " (misconfigured: key, permissions or model mapping)" : ""}` });
        onAttempt?.(p.name, misconfigured ? "misconfigured" : "error");
        continue;
      }
      p.breaker.success();
      p.misconfigured = false;
      onAttempt?.(p.name, "ok");
      return { ok: true, provider: p, response: res };
    } catch (err) {
      clearTimeout(timer);
      p.breaker.failure();
      const reason = ac.signal.aborted ? `timeout after ${p.timeoutMs} ms` : `connection failed (${(err as { cause?: { code?: string } }).cause?.code ?? "error"})`;
      tried.push({ provider: p.name, reason });
      onAttempt?.(p.name, ac.signal.aborted ? "timeout" : "error");
    }
  }
  return { ok: false, tried };
}
