/**
 * What a client of the drill can tell about a continued stream. The official SDK
 * ignores SSE comments, so the relay's `: x-llmha-continued …` line is read here, from a copy of
 * the bytes on their way to the SDK (a `fetch` wrapper): the SDK parses the same stream. And
 * what an undisturbed run of a seeded greedy request answers, from the fakes' own decoder: the
 * text a continued stream must equal.
 */
import { CONTINUED_HEADER } from "../../contracts/edge";
import { trueGreedy } from "../sim/fake-inference/greedy";
import type { Timeline } from "./timeline";

/** The seed of the drill's greedy requests (any integer: the fakes' greedy answer ignores its value). */
export const DRILL_SEED = 31;

const seen = new WeakMap<Response, { how: string | null }>();

/** `fetch` that notes, per response, the relay's continuation comment in its event stream. */
export function continuationWatchingFetch(inner: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    // Retried before anything was sent: a header says so; a stream carried on says so inside.
    const mark = { how: res.headers.get(CONTINUED_HEADER) };
    seen.set(res, mark);
    if (!res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) return res;
    const decoder = new TextDecoder();
    let tail = "";
    const watched = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, ctl) {
          if (mark.how === null) {
            // Lines may straddle chunks: keep the unfinished last line.
            const lines = (tail + decoder.decode(chunk, { stream: true })).split("\n");
            tail = lines.pop() ?? "";
            const line = lines.find((l) => l.startsWith(`: ${CONTINUED_HEADER} `));
            if (line) mark.how = line.slice(CONTINUED_HEADER.length + 3).trim();
          }
          ctl.enqueue(chunk);
        },
      }),
    );
    // The SDK reads `body` from the object fetch gave it: an own property shadows the getter.
    Object.defineProperty(res, "body", { value: watched });
    return res;
  };
}

/** How the relay carried the stream of `res` on (`continue after 12 tokens`), or null when it did not. */
export function continuationOf(res: Response): string | null {
  return seen.get(res)?.how ?? null;
}

/** The text an undisturbed healthy fake answers a seeded greedy request with, as its chat or completion context renders it. */
export function undisturbedText(shape: "chat" | "completion", prompt: string, maxTokens: number): string {
  // The fakes render one user message as its content and a new line (openai-compat.ts, chatPrompt).
  return trueGreedy(shape === "chat" ? `${prompt}\n` : prompt, maxTokens)
    .map((t) => t.text)
    .join("");
}

/** Records in the timeline an answer the relay carried on (nothing for one it did not). */
export function recordContinued(timeline: Timeline, client: string, t: number, end: number, got: { continued: string | null; exact: boolean | null }): void {
  if (got.continued) timeline.continued.push({ t, end, client, how: got.continued, exact: got.exact });
}
