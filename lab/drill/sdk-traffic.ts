/**
 * The client class an application is: the official `openai` package with its DEFAULT retries
 * (2, on connection errors, 408/409/429 and 5xx, with backoff) and timeout, talking to the
 * service's DNS name. Each attempt resolves the name again (a custom `fetch` puts an address
 * of the latest DNS answer in the URL, as a new connection through the system resolver would),
 * so a retry after a dead AZ's address can land on a live one. Every worker alternates a short
 * completion and a streamed chat of about a second; a failure is what the application would
 * have seen after the SDK's own retries. A stream cut after its first chunk is never retried.
 * The chats are greedy and seeded: a stream the continuation relay carried on must read exactly
 * as an undisturbed run of it, which the drill records in the timeline.
 */
import { OpenAI } from "openai";
import type { TrafficClient } from "./traffic";
import { drillKey } from "./credentials";
import { failureOf, send, type RequestShape } from "./workload";
import { continuationWatchingFetch, recordContinued } from "./continued";
import type { Timeline } from "./timeline";

/** The SDK-default client class's name in the timeline and the report. */
export const SDK_CLIENT = "llm-ha-sdk";
/** The name the SDK is given; never resolved (the custom fetch swaps in an address). */
const SERVICE_HOST = "inference.llmha.test";

/** `fetch` that sends each attempt to an address of the latest DNS answer (a connection error when none). */
export function resolvingFetch(address: () => string | null): typeof fetch {
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const a = address();
    if (!a) return Promise.reject(new TypeError(`fetch failed: ${url.hostname} did not resolve`));
    url.hostname = a;
    return fetch(url, init);
  };
}

/**
 * The SDK-default class as a traffic client: `address()` gives an address of the latest DNS
 * answer for each attempt; even requests are 1-token completions, odd ones ~1 s streamed chats.
 */
export function sdkClient(o: {
  address(): string | null;
  port: number;
  workers: number;
  model: string;
  timeline: Timeline;
  now(): number;
  /** The tenant's key (default the drill's `sdk` tenant). */
  apiKey?: string;
  /** The service's own name and TLS (a game day on the cloud: the public edge, resolved by the system). */
  host?: string;
  https?: boolean;
}): TrafficClient {
  const host = o.host ?? SERVICE_HOST;
  const client = new OpenAI({
    baseURL: `${o.https ? "https" : "http"}://${host}:${o.port}/v1`,
    apiKey: o.apiKey ?? drillKey("sdk"),
    fetch: continuationWatchingFetch(o.host ? fetch : resolvingFetch(o.address)),
  });
  return {
    name: SDK_CLIENT,
    workers: o.workers,
    target: () => host,
    send: async (_host, n) => {
      const shape: RequestShape = n % 2 === 0 ? "completion" : "chat-stream";
      const t = o.now();
      try {
        // The chats greedy and seeded: one the relay continued is checked against an undisturbed run.
        const got = await send(client, o.model, shape, "ping", shape === "completion" ? 1 : 50, new AbortController().signal, shape === "chat-stream");
        recordContinued(o.timeline, SDK_CLIENT, t, o.now(), got);
        return null;
      } catch (err) {
        const f = failureOf(err);
        return { why: f.why ?? "error", ...(f.place ? { place: f.place } : {}) };
      }
    },
  };
}
