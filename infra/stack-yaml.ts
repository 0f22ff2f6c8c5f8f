/**
 * Reads the YAML subset the `Pulumi.<stack>.yaml` files use (block maps and lists,
 * plain / quoted scalars, `#` comments, flow lists of scalars), so the tests run the
 * program, and `llm-ha cost` resolves it, with exactly the configuration `pulumi up`
 * would, without a YAML dependency.
 */
export type Yaml = string | number | boolean | null | Yaml[] | { [k: string]: Yaml };

export class StackYamlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StackYamlError";
  }
}

interface Line {
  indent: number;
  text: string;
  no: number;
}

/** Index of the first character outside quotes for which `hit` holds, or -1. */
function outsideQuotes(s: string, hit: (ch: string, i: number) => boolean): number {
  let quote = "";
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (quote) {
      if (ch === quote) quote = "";
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (hit(ch, i)) return i;
  }
  return -1;
}

function stripComment(s: string): string {
  const at = outsideQuotes(s, (ch, i) => ch === "#" && (i === 0 || /\s/.test(s[i - 1])));
  return at < 0 ? s : s.slice(0, at);
}

function scalar(raw: string): Yaml {
  const s = raw.trim();
  if (s.startsWith('"')) return JSON.parse(s) as string;
  if (s.startsWith("'")) return s.slice(1, -1).replace(/''/g, "'");
  if (s.startsWith("[")) {
    const inner = s.slice(1, -1).trim();
    return inner ? inner.split(",").map((x) => scalar(x)) : [];
  }
  if (s === "true" || s === "false") return s === "true";
  if (s === "null" || s === "~" || s === "") return null;
  if (/^-?\d+(\.\d+)?$/.test(s)) return Number(s);
  return s;
}

/** Index of the `:` that separates a key from its value, outside quotes. */
function keyColon(s: string): number {
  return outsideQuotes(s, (ch, i) => ch === ":" && (i === s.length - 1 || s[i + 1] === " "));
}

function parseBlock(lines: Line[], start: number, indent: number): [Yaml, number] {
  const first = lines[start];
  if (first.text.startsWith("- ") || first.text === "-") {
    const list: Yaml[] = [];
    let i = start;
    while (i < lines.length && lines[i].indent === indent && (lines[i].text.startsWith("- ") || lines[i].text === "-")) {
      const rest = lines[i].text.slice(1).trimStart();
      if (rest === "") {
        const [v, next] = parseBlock(lines, i + 1, lines[i + 1].indent);
        list.push(v);
        i = next;
      } else if (keyColon(rest) > 0) {
        // `- key: v` starts a map whose further keys sit at the dash's indent + 2.
        const childIndent = indent + (lines[i].text.length - rest.length);
        const sub: Line[] = [{ indent: childIndent, text: rest, no: lines[i].no }];
        let j = i + 1;
        while (j < lines.length && lines[j].indent >= childIndent) sub.push(lines[j++]);
        list.push(parseBlock(sub, 0, childIndent)[0]);
        i = j;
      } else {
        list.push(scalar(rest));
        i++;
      }
    }
    return [list, i];
  }
  const map: { [k: string]: Yaml } = {};
  let i = start;
  while (i < lines.length && lines[i].indent === indent) {
    const { text, no } = lines[i];
    const c = keyColon(text);
    if (c <= 0) throw new StackYamlError(`line ${no}: expected "key: value"`);
    const k = scalar(text.slice(0, c));
    const rest = text.slice(c + 1).trim();
    if (rest !== "") {
      map[String(k)] = scalar(rest);
      i++;
    } else if (i + 1 < lines.length && lines[i + 1].indent > indent) {
      const [v, next] = parseBlock(lines, i + 1, lines[i + 1].indent);
      map[String(k)] = v;
      i = next;
    } else if (i + 1 < lines.length && lines[i + 1].indent === indent && lines[i + 1].text.startsWith("- ")) {
      const [v, next] = parseBlock(lines, i + 1, indent);
      map[String(k)] = v;
      i = next;
    } else {
      map[String(k)] = null;
      i++;
    }
  }
  if (i < lines.length && lines[i].indent > indent) throw new StackYamlError(`line ${lines[i].no}: unexpected indentation`);
  return [map, i];
}

/** Parses the YAML subset described above. */
export function parseStackYaml(text: string): Yaml {
  const lines: Line[] = [];
  text.split(/\r?\n/).forEach((raw, idx) => {
    if (raw.includes("\t")) throw new StackYamlError(`line ${idx + 1}: tabs are not YAML indentation`);
    const body = stripComment(raw).trimEnd();
    if (body.trim() === "" || body.trim() === "---") return;
    lines.push({ indent: body.length - body.trimStart().length, text: body.trimStart(), no: idx + 1 });
  });
  if (lines.length === 0) return null;
  const [v, end] = parseBlock(lines, 0, lines[0].indent);
  if (end !== lines.length) throw new StackYamlError(`line ${lines[end].no}: unexpected indentation`);
  return v;
}

/** A stack file's `config:` as the Pulumi CLI hands it to the program: strings, structured values as JSON. */
export function stackConfigValues(text: string): Record<string, string> {
  const doc = parseStackYaml(text);
  const config = (doc as { config?: Record<string, Yaml> } | null)?.config ?? {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(config)) {
    out[k] = typeof v === "string" ? v : JSON.stringify(v);
  }
  return out;
}
