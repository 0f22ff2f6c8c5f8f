// Narrowing helpers for resource properties. Policies read raw JSON (the engine's
// deserialized inputs, or what Pulumi's mocks captured), so every field is checked
// before use instead of trusting the SDK's Args types at run time.

/** A JSON object as the engine hands it to a policy. */
export type Props = Record<string, unknown>;

export function record(v: unknown): Props | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Props) : undefined;
}

/** The array, or `[]` for anything else (an unset list reads as empty). */
export function list(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

export function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** A number, also from a numeric string (Kubernetes and some AWS fields take both). */
export function num(v: unknown): number | undefined {
  if (typeof v === "number" && Number.isFinite(v)) return v;
  if (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v))) return Number(v);
  return undefined;
}

export function strings(v: unknown): string[] {
  return list(v).filter((x): x is string => typeof x === "string");
}

/** A string map such as `labels` or `tags`; non-string values are dropped. */
export function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(record(v) ?? {})) if (typeof x === "string") out[k] = x;
  return out;
}

/** `a, b and c` for messages. */
export function joinWords(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}
