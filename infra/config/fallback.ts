import * as pulumi from "@pulumi/pulumi";
import { isObj } from "./read";
import { Problems } from "../problems";

/** One external OpenAI-compatible upstream of the L4 fallback; the list's order is its priority. */
export interface FallbackProviderConfig {
  /** `[A-Za-z0-9_.-]+`, unique: the metrics' `provider` label and `x-llmha-degraded: upstream:<name>`. */
  name: string;
  /** Base URL, `https://…/v1`. */
  url: string;
  /** To the response headers. Default 10000. */
  timeoutMs: number;
  /** Our model → theirs; `"*": "*"` passes any. */
  models: Record<string, string>;
  /** The stack secret holding its key (`llm-ha:<keySecret>`), if it needs one. */
  keySecret?: string;
  /** That secret's value. */
  key?: pulumi.Output<string>;
}

/** `llm-ha:fallback`. */
export interface FallbackConfig {
  /** Run `llm-ha fallback` beside each L1 proxy. Default true. */
  enabled: boolean;
  /** Models it serves (others 404). Default `[inference.model]`. */
  models: string[];
  /** External upstreams, in order of priority. Default none (cache and queue only). */
  providers: FallbackProviderConfig[];
  /** Queue depth at which it answers 503 `queue_full`. Default the service's (100000). */
  maxQueueDepth?: number;
  /** Replay pace through the L1 proxy, requests/s. Default the service's (5). */
  replayRps?: number;
}

const FALLBACK_KEYS = ["enabled", "models", "providers", "maxQueueDepth", "replayRps"];
const FALLBACK_PROVIDER_KEYS = ["name", "url", "timeoutMs", "models", "keySecret"];

/** `llm-ha:fallback`, validated; every problem names its key. */
export function fallbackOf(v: unknown, cfg: pulumi.Config, servedModel: string, p: Problems): FallbackConfig {
  const k = `${cfg.name}:fallback`;
  const off: FallbackConfig = { enabled: true, models: servedModel ? [servedModel] : [], providers: [] };
  if (v === undefined) return off;
  if (!isObj(v)) {
    p.add(k, "must be an object ({enabled, models, providers, maxQueueDepth, replayRps})");
    return off;
  }
  for (const x of Object.keys(v)) if (!FALLBACK_KEYS.includes(x)) p.add(`${k}.${x}`, `unknown setting; known: ${FALLBACK_KEYS.join(", ")}`);
  if (v.enabled !== undefined && typeof v.enabled !== "boolean") p.add(`${k}.enabled`, "must be true or false");
  let models = off.models;
  if (v.models !== undefined) {
    if (!Array.isArray(v.models) || v.models.length === 0 || !v.models.every((m) => typeof m === "string" && m !== "")) p.add(`${k}.models`, "must be a non-empty list of model names");
    else if (new Set(v.models).size !== v.models.length) p.add(`${k}.models`, "lists a model twice");
    else models = v.models as string[];
  }
  const posInt = (name: "maxQueueDepth" | "replayRps", max: number): number | undefined => {
    const x = v[name];
    if (x === undefined) return undefined;
    if (!Number.isInteger(x) || (x as number) < 1 || (x as number) > max) {
      p.add(`${k}.${name}`, `must be an integer from 1 to ${max}`);
      return undefined;
    }
    return x as number;
  };
  const providers: FallbackProviderConfig[] = [];
  const raw = v.providers ?? [];
  if (!Array.isArray(raw)) p.add(`${k}.providers`, "must be a list of providers, in order of priority");
  else {
    raw.forEach((pr: unknown, i) => {
      const path = `${k}.providers[${i}]`;
      if (!isObj(pr)) return p.add(path, "must be an object ({name, url, models, timeoutMs, keySecret})");
      if (pr.key !== undefined || pr.apiKey !== undefined) {
        p.add(`${path}.${pr.key !== undefined ? "key" : "apiKey"}`, `a provider key never goes in the stack file in clear: pulumi config set --secret ${cfg.name}:<secretName> <key>, then keySecret: <secretName>`);
      }
      for (const x of Object.keys(pr)) if (!FALLBACK_PROVIDER_KEYS.includes(x) && x !== "key" && x !== "apiKey") p.add(`${path}.${x}`, `unknown setting; known: ${FALLBACK_PROVIDER_KEYS.join(", ")}`);
      const name = pr.name;
      if (typeof name !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) p.add(`${path}.name`, "is required: [A-Za-z0-9_.-]+, at most 64 characters");
      else if (providers.some((x) => x.name === name)) p.add(`${path}.name`, `provider ${name} listed twice`);
      let url = "";
      if (typeof pr.url !== "string") p.add(`${path}.url`, "is required: the provider's OpenAI-compatible base URL, https://…/v1");
      else {
        let u: URL | undefined;
        try {
          u = new URL(pr.url);
        } catch {
          p.add(`${path}.url`, `${JSON.stringify(pr.url)} is not a URL`);
        }
        if (u && u.protocol !== "https:") p.add(`${path}.url`, `${pr.url} must be https: the key and the prompts cross the internet`);
        else if (u && (u.username || u.password)) p.add(`${path}.url`, "must not carry credentials; put the key in keySecret");
        else if (u) url = pr.url.replace(/\/+$/, "");
      }
      const timeoutMs = pr.timeoutMs ?? 10_000;
      if (!Number.isInteger(timeoutMs) || (timeoutMs as number) < 100 || (timeoutMs as number) > 600_000) p.add(`${path}.timeoutMs`, "must be an integer from 100 to 600000 (ms to the response headers)");
      const map: Record<string, string> = {};
      if (!isObj(pr.models) || Object.keys(pr.models).length === 0 || !Object.values(pr.models).every((m) => typeof m === "string" && m !== "")) {
        p.add(`${path}.models`, 'is required: a map of our model to the provider\'s, e.g. {"<served model>": gpt-4o-mini} or {"*": "*"}');
      } else {
        for (const [ours, theirs] of Object.entries(pr.models)) {
          if (ours !== "*" && !models.includes(ours)) p.add(`${path}.models.${ours}`, `is not a served model (${k}.models: ${models.join(", ")})`);
          else map[ours] = theirs as string;
        }
      }
      let keySecret: string | undefined;
      let key: pulumi.Output<string> | undefined;
      if (pr.keySecret !== undefined) {
        if (typeof pr.keySecret !== "string" || !/^[A-Za-z][A-Za-z0-9_-]*$/.test(pr.keySecret)) p.add(`${path}.keySecret`, "must name a stack secret of this project, e.g. fallbackKeyOpenai");
        else {
          keySecret = pr.keySecret;
          key = cfg.getSecret(keySecret);
          if (key === undefined) p.add(`${cfg.name}:${keySecret}`, `is required by ${path}.keySecret: pulumi config set --secret ${cfg.name}:${keySecret} <the provider's API key>`);
        }
      }
      if (typeof name === "string") providers.push({ name, url, timeoutMs: timeoutMs as number, models: map, keySecret, key });
    });
  }
  return { enabled: v.enabled !== false, models, providers, maxQueueDepth: posInt("maxQueueDepth", 10_000_000), replayRps: posInt("replayRps", 1000) };
}
