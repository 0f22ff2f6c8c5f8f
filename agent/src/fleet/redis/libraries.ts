/**
 * Every Redis Functions library llm-ha calls: what the controller loads at each connection and
 * `llm-ha redis-functions load` loads at deploy time (functions.ts).
 */
import { fallbackLibrary } from "./fallback-functions";
import type { FunctionLibrary } from "./functions";
import { fleetLibrary } from "./scripts";

export function allLibraries(): FunctionLibrary[] {
  return [fleetLibrary(), fallbackLibrary()];
}
