import type { ModelIdentity, ModelObservation } from "./signals";

/** What a ready server serves, as the agent reads its model list against the configured model. */
export interface Served {
  /** What the probe asks for: the configured model (its absence is MODEL_MISSING), else the first served. */
  probeModel: string | null;
  /**
   * What the server really serves (the registry reports it): the configured model when it is served,
   * else the first id it lists — a server on the wrong model shows as that model.
   */
  identity: ModelIdentity | null;
  /** The configured model is among those served (always, when none is configured). */
  configuredServed: boolean;
}

export function servedBy(obs: Extract<ModelObservation, { kind: "ready" }>, configured: string | null): Served {
  const configuredServed = configured === null || obs.served.includes(configured);
  const id = configured !== null && configuredServed ? configured : (obs.served[0] ?? null);
  const identity = id === null ? null : obs.identity?.id === id ? obs.identity : { id, revision: null, dtype: null, maxContext: null };
  return { probeModel: configured ?? obs.served[0] ?? null, identity, configuredServed };
}
