/**
 * The game day's traffic through the public edge, with its own client key: the drill's two
 * client classes, a plain client (one small completion at a time, every failure recorded) and
 * the official `openai` package with its default retries (what an application sees). Named as
 * the drill names them, so the report's columns mean the same.
 */
import { MAIN_CLIENT } from "../drill/scenarios/runner";
import { sdkClient } from "../drill/sdk-traffic";
import type { Timeline } from "../drill/timeline";
import type { TrafficClient } from "../drill/traffic";

export interface EdgeTarget {
  /** `http(s)://host:port` of the next request (the lab: an address of the latest DNS answer), or null while none. */
  baseUrl(): string | null;
  /** The SDK's host for each attempt: an address of the latest DNS answer (lab) or the edge's own name (cloud). */
  address(): string | null;
  port: number;
  https: boolean;
  /** Set when the system resolver resolves the name (the cloud): the SDK keeps its URL as is. */
  host?: string;
}

export function gamedayClients(o: { edge: EdgeTarget; apiKey: string; model: string; timeline: Timeline; now(): number; workers?: number }): TrafficClient[] {
  const workers = o.workers ?? 2;
  return [
    { name: MAIN_CLIENT, workers, headers: { authorization: `Bearer ${o.apiKey}` }, target: () => o.edge.baseUrl() },
    sdkClient({ address: () => o.edge.address(), port: o.edge.port, workers, model: o.model, timeline: o.timeline, now: o.now, apiKey: o.apiKey, host: o.edge.host, https: o.edge.https }),
  ];
}
