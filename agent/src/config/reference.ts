import { OPTION_SPECS, flagOf, groupedSpecs } from "./spec";

/** The configuration tables, one per concern, from the spec (docs/settings.md carries them; a test keeps them equal). */
export function configReferenceMarkdown(): string {
  return groupedSpecs()
    .map((g) => {
      const rows = g.specs.map((s) => `| \`${s.env}\` | \`${flagOf(s.env)}\` | ${s.defaultText} | ${s.description}${s.contract ? "" : " *(llm-ha extension)*"} |`);
      return [`## ${g.title}`, "", "| variable | flag | default | meaning |", "|---|---|---|---|", ...rows].join("\n");
    })
    .join("\n\n");
}

/** docs/settings.md, whole: regenerate with `npx tsx agent/src/config/reference.ts > docs/settings.md`. */
export function settingsPage(): string {
  const contract = OPTION_SPECS.filter((s) => s.contract).length;
  return `# Settings of \`llm-ha agent\`

<!-- Generated from agent/src/config/spec.ts by \`npx tsx agent/src/config/reference.ts > docs/settings.md\`;
     test/agent/config.test.ts fails when this page and the spec differ. -->

Every setting is an environment variable and a \`--flag\` of \`llm-ha agent\` (flags win). A bad value stops start-up
with a message naming the variable, exit code 2; a port already in use exits 1; an \`LLMHA_*\` variable no setting
reads is warned about at start, with the closest real name. \`llm-ha agent --help\` prints the same list, in the same groups. The ${contract}
rows not marked *llm-ha extension* are the external contract ([design.md](design.md#environment-variables)); the
rest are llm-ha's own.

${configReferenceMarkdown()}

The settings of \`llm-ha fallback\` (the L4 service) are in [fallback.md](fallback.md); the stack settings of the
Pulumi program (\`llm-ha:*\`) in [infra.md](infra.md) and [operations.md](operations.md#infrastructure-and-policies).
`;
}

if (require.main === module) process.stdout.write(settingsPage());
