/**
 * Both ends of the fake's admin API, which runs on its own port so that a fault never depends on
 * the inference port answering: the handler (`POST /mode`, `GET /state`, `GET /stats`) and the
 * client the drill and process tests change a running fake's mode with.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { FakeInferenceAdminError, FakeInferenceSettingsError, parseSettingsChange, type FakeInference, type FakeInferenceSettings, type FakeInferenceState, type FakeInferenceStats } from "./settings";
import { json, readBody, send } from "./wire";

/** Answers one admin request: 400 for a bad change, so a caller can tell its mistake from a broken fake. */
export async function handleAdmin(fake: FakeInference, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    if (req.method === "POST" && req.url === "/mode") {
      const body = await readBody(req);
      send(res, json(200, await fake.setMode(parseSettingsChange(JSON.parse(body)))));
    } else if (req.method === "GET" && req.url === "/state") {
      send(res, json(200, fake.state()));
    } else if (req.method === "GET" && req.url === "/stats") {
      send(res, json(200, fake.stats()));
    } else {
      send(res, json(404, { error: `no ${req.method} ${req.url} on the admin port` }));
    }
  } catch (err) {
    const bad = err instanceof FakeInferenceSettingsError || err instanceof SyntaxError;
    send(res, json(bad ? 400 : 500, { error: err instanceof Error ? err.message : String(err) }));
  }
}

/** Changes a running fake's mode or settings through its admin API (for the drill and process tests). */
export async function setFakeInferenceMode(
  adminUrl: string,
  change: Partial<FakeInferenceSettings>,
  timeoutMs = 5000,
): Promise<FakeInferenceState> {
  let res: Response;
  try {
    res = await fetch(new URL("/mode", adminUrl), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(change),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    throw new FakeInferenceAdminError(`cannot reach ${adminUrl}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const text = await res.text();
  if (res.status !== 200) throw new FakeInferenceAdminError(`${adminUrl}/mode answered ${res.status}: ${text}`);
  return JSON.parse(text) as FakeInferenceState;
}

/** A running fake's counters (`GET /stats` on its admin port); null when it does not answer within `timeoutMs`. */
export async function fakeInferenceStats(adminUrl: string, timeoutMs = 1000): Promise<Partial<FakeInferenceStats> | null> {
  try {
    const r = await fetch(new URL("/stats", adminUrl), { signal: AbortSignal.timeout(timeoutMs) });
    return (await r.json()) as Partial<FakeInferenceStats>;
  } catch {
    return null;
  }
}
