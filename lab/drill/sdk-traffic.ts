/**
 * The client class an application is: the official `openai` package with its DEFAULT retries
 * (2, on connection errors, 408/409/429 and 5xx, with backoff) and timeout, talking to the
 * service's DNS name. Each attempt resolves the name again (a custom `fetch` puts an address
 * of the latest DNS answer in the URL, as a new connection through the system resolver would),
 * so a retry after a dead AZ's address can land on a live one. Every worker alternates a short
 * completion and a streamed chat of about a second; a failure is what the application would
 * have seen after the SDK's own retries. A stream cut after its first chunk is never retried.
 */
import { OpenAI } from "openai";
import { Loop } from "../../agent/src/util/loop";
import type { Timeline } from "./timeline";
import { failureOf, send, type RequestShape } from "./workload";

/** The SDK-default client class's name in the timeline and the report. */
export const SDK_CLIENT = "llm-ha-sdk";
/** The name the SDK is given; never resolved (the custom fetch swaps in an address). */
const SERVICE_HOST = "inference.llmha.test";

export interface SdkTrafficOptions {
  /** An address of the latest DNS answer for the next attempt, or null when none is known. */
  address(): string | null;
  port: number;
  workers: number;
  timeline: Timeline;
  now(): number;
  model: string;
  /** Pause between one worker's requests. Default 25 ms. */
  gapMs?: number;
}

export interface SdkTraffic {
  /** Streams that failed after their first chunk (cut mid-answer), by start time. */
  readonly cut: number[];
  stop(): Promise<void>;
}

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

export function startSdkTraffic(o: SdkTrafficOptions): SdkTraffic {
  const client = new OpenAI({ baseURL: `http://${SERVICE_HOST}:${o.port}/v1`, apiKey: "llm-ha-drill", fetch: resolvingFetch(o.address) });
  const loops: Loop[] = [];
  const inFlight = new Set<Promise<void>>();
  const cut: number[] = [];
  o.timeline.sent[SDK_CLIENT] ??= 0;
  for (let w = 0; w < o.workers; w++) {
    let n = 0;
    const loop = new Loop(
      o.gapMs ?? 25,
      async () => {
        const shape: RequestShape = n++ % 2 === 0 ? "completion" : "chat-stream";
        const maxTokens = shape === "completion" ? 1 : 50;
        const t = o.now();
        o.timeline.sent[SDK_CLIENT]++;
        const p = send(client, o.model, shape, "ping", maxTokens, new AbortController().signal).then(
          () => undefined,
          (err: unknown) => {
            const why = failureOf(err).why ?? "error";
            if (why === "stream cut" || why.startsWith("short answer")) cut.push(t);
            o.timeline.failures.push({ t, end: o.now(), client: SDK_CLIENT, why });
          },
        );
        inFlight.add(p);
        await p;
        inFlight.delete(p);
      },
      () => undefined,
    );
    loop.start(w * 11);
    loops.push(loop);
  }
  return {
    cut,
    async stop() {
      for (const l of loops) l.stop();
      await Promise.allSettled([...inFlight]);
    },
  };
}
