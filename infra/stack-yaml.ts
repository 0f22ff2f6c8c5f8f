/**
 * Reads the `Pulumi.<stack>.yaml` files with the `yaml` package, so the tests run the
 * program, and `llm-ha cost` resolves it, with the configuration `pulumi up` would: anchors
 * and aliases, `<<` merge keys (the CLI's Go YAML reader takes them), block scalars, flow
 * maps such as `{secure: …}`. Errors name the line and column.
 */
import { readFileSync } from "node:fs";
import { isAlias, isMap, isScalar, LineCounter, parseDocument, visit, type Document, type YAMLError } from "yaml";

export type Yaml = string | number | boolean | null | Yaml[] | { [k: string]: Yaml };

export class StackYamlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StackYamlError";
  }
}

/** `line L, column C: what` for the source offset `pos`. */
function at(lines: LineCounter, pos: number, what: string): string {
  const { line, col } = lines.linePos(pos);
  return `line ${line}, column ${col}: ${what}`;
}

/** The first error, where it is; later ones mostly follow from it, so they are only counted. */
function problem(lines: LineCounter, errors: readonly YAMLError[]): StackYamlError {
  const [first] = errors;
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more problem${errors.length > 2 ? "s" : ""})` : "";
  return new StackYamlError(at(lines, first.pos[0], first.message) + more);
}

/**
 * `toJS` throws a bare ReferenceError, without a position, for an alias whose anchor is not
 * set before it; finding it first lets the error name its line.
 */
function checkAliases(doc: Document, lines: LineCounter): void {
  visit(doc, {
    Alias(_, node) {
      if (node.resolve(doc) === undefined) throw new StackYamlError(at(lines, node.range?.[0] ?? 0, `alias *${node.source} has no anchor &${node.source} before it`));
    },
  });
}

/** The checked document of `text` and its plain value. */
function read(text: string): { doc: Document; value: Yaml } {
  const lines = new LineCounter();
  // `prettyErrors: false`: the message alone; `at` adds the position once, on one line.
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, merge: true });
  if (doc.errors.length > 0) throw problem(lines, doc.errors);
  // Warnings (an unknown `!tag`) keep the plain value under the tag; they do not stop the read.
  checkAliases(doc, lines);
  try {
    return { doc, value: doc.toJS() as Yaml };
  } catch (err) {
    // What is left is the alias-count guard against a "billion laughs" file.
    if (err instanceof ReferenceError) throw new StackYamlError(err.message);
    throw err;
  }
}

/** Parses one stack (or project) file; throws a `StackYamlError` that names the line. */
export function parseStackYaml(text: string): Yaml {
  return read(text).value;
}

/**
 * How the file writes each top-level config value that YAML reads as a number or boolean.
 * The CLI reads a top-level value into a string, so `1.10` reaches the program as "1.10",
 * not "1.1", and `0x10` as "0x10"; inside a structured value it is JSON, as typed here.
 */
function writtenScalars(doc: Document): Map<string, string> {
  const out = new Map<string, string>();
  const config = doc.get("config", true);
  if (!isMap(config)) return out;
  for (const { key, value } of config.items) {
    const node = isAlias(value) ? value.resolve(doc) : value;
    if (!isScalar(key) || !isScalar(node) || node.source === undefined) continue;
    if (typeof node.value === "number" || typeof node.value === "boolean") out.set(String(key.value), node.source);
  }
  return out;
}

/**
 * A stack file's `config:` as the Pulumi CLI hands it to the program: strings, structured
 * values as JSON. A `secure:` value stays the object the file holds (`{"secure":"<ciphertext>"}`
 * as JSON, also inside a structured value): nothing here decrypts it or reads it as clear text.
 */
export function stackConfigValues(text: string): Record<string, string> {
  const { doc, value } = read(text);
  const config = (value as { config?: Record<string, Yaml> } | null)?.config ?? {};
  const written = writtenScalars(doc);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(config)) {
    out[k] = typeof v === "string" ? v : (written.get(k) ?? JSON.stringify(v));
  }
  return out;
}

/** `stackConfigValues` of the file at `file`; a `StackYamlError` names the file as well as the line. */
export function readStackFile(file: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new StackYamlError(`${file}: cannot be read: ${(err as Error).message}`);
  }
  try {
    return stackConfigValues(text);
  } catch (err) {
    if (err instanceof StackYamlError) throw new StackYamlError(`${file}: ${err.message}`);
    throw err;
  }
}
