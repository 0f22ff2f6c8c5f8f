/**
 * Streams cut, and the ones that had to be: a stream whose response had begun and
 * then broke cannot be replayed by any client or proxy, so the drill counts them per scenario
 * and client class and tells apart those nothing could have saved — the stream's own server
 * died under it (SIGKILL, a query of death), or the AZ proxy it went through did — from those a
 * planned move or a wrong decision cut. Pure: the deaths come from the stack, the cuts from the
 * timeline.
 */
import { isStreamCut, type ContinuedStream, type FailedRequest } from "./timeline";

/** A server or AZ proxy that died (drill clock): streams on `server` (`address:port`) or sent to `via` (an address) were lost with it. */
export interface Death {
  t: number;
  server?: string;
  via?: string;
}

export interface CutCount {
  /** Streams cut in the window. */
  cut: number;
  /** Of those, the ones on a server or through a proxy that died while they ran. */
  hadTo: number;
}

/** A death counts for a stream from its start to a little after the client saw the cut (the exit is recorded once the process is reaped). */
const DEATH_SLACK_MS = 1000;

/** Whether a cut stream ran on something that died while it ran. */
export function cutHadToBe(f: FailedRequest, deaths: readonly Death[]): boolean {
  const end = f.end ?? f.t;
  const place = f.place;
  if (!place) return false;
  return deaths.some((d) => d.t >= f.t - DEATH_SLACK_MS && d.t <= end + DEATH_SLACK_MS && ((d.server !== undefined && d.server === place.server) || (d.via !== undefined && d.via === place.via)));
}

/** Streams cut in [from, until] of one client (or, null, of every client), and how many had to be. */
export function countCuts(failures: readonly FailedRequest[], client: string | null, from: number, until: number, deaths: readonly Death[]): CutCount {
  const cuts = failures.filter((f) => (client === null || f.client === client) && isStreamCut(f.why) && f.t <= until && (f.end ?? f.t) >= from);
  return { cut: cuts.length, hadTo: cuts.filter((f) => cutHadToBe(f, deaths)).length };
}

export interface ContinuedCount {
  /** Answers the continuation relay carried on. */
  n: number;
  /** Of those, greedy seeded ones, and how many of them read exactly as an undisturbed run. */
  greedy: number;
  exact: number;
}

/** Answers continued in [from, until] (of every client class). */
export function countContinued(continued: readonly ContinuedStream[], from: number, until: number): ContinuedCount {
  const c = continued.filter((x) => x.t <= until && x.end >= from);
  return { n: c.length, greedy: c.filter((x) => x.exact !== null).length, exact: c.filter((x) => x.exact === true).length };
}
