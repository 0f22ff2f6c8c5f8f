import { OPTION_SPECS, flagOf } from "./spec";

/** The README's configuration table, from the spec (a test keeps README equal to it). */
export function configReferenceMarkdown(): string {
  const rows = OPTION_SPECS.map((s) => `| \`${s.env}\` | \`${flagOf(s.env)}\` | ${s.defaultText} | ${s.description}${s.contract ? "" : " *(llm-ha extension)*"} |`);
  return ["| variable | flag | default | meaning |", "|---|---|---|---|", ...rows].join("\n");
}

if (require.main === module) process.stdout.write(configReferenceMarkdown() + "\n");
