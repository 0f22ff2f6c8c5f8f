// Flat config: the recommended TypeScript rules, the house rules (docs/architecture.md) that a linter
// can check (no `any`, no default exports, named errors), and the one-way boundaries of
// docs/architecture.md (a wrong-way import or an import circle is a lint error, not a review comment).
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import { importX } from "eslint-plugin-import-x";
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";

/**
 * Who may import whom. Each zone forbids files under `target` to import anything under
 * `from` (paths from the repository root); `except` lists the allowed parts of `from`.
 *   contracts/  the shared leaf: imports no other folder of the repository;
 *   agent/src/  what the image runs: contracts/ only, never the lab, infra, policies, tests;
 *   infra/      the Pulumi program and the operator tools over stack files: contracts/ only
 *               (and never the agent's runtime, the lab, policies or tests);
 *   policies/   the CrossGuard pack: contracts/ only; its offline CLI also runs the infra
 *               program under mocks (infra/capture), as `pulumi preview` would;
 *   lab/        drill, simulated nodes, engines, bench: imports the runtime, never infra's
 *               Pulumi program, policies or tests.
 */
export const BOUNDARY_ZONES = [
  { target: "./contracts", from: ".", except: ["./contracts", "./node_modules"], message: "contracts/ is the shared leaf: it imports no other folder." },
  { target: "./agent/src", from: ["./infra", "./policies", "./test", "./lab"], message: "agent/src is what the image runs: it imports contracts/ only (docs/architecture.md)." },
  { target: "./infra", from: ["./agent", "./policies", "./test", "./lab"], message: "infra/ imports contracts/ only (docs/architecture.md)." },
  { target: "./policies", from: ["./agent", "./test", "./lab"], message: "policies/ imports contracts/ only (docs/architecture.md)." },
  { target: "./policies", from: "./infra", except: ["./capture.ts"], message: "policies/ imports contracts/ only; its offline CLI may run infra/capture (docs/architecture.md)." },
  { target: "./lab", from: ["./policies", "./test"], message: "the lab imports the runtime and contracts, never policies or tests." },
];

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "**/*.cjs", "**/*.mjs"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    plugins: { "import-x": importX },
    settings: {
      "import-x/resolver-next": [createTypeScriptImportResolver({ project: "./tsconfig.json" })],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
      "import-x/extensions": [".ts", ".js"],
    },
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-syntax": [
        "error",
        { selector: "ExportDefaultDeclaration", message: "Use named exports (STYLE.md rule 8)." },
        { selector: "ThrowStatement > Literal", message: "Throw a named error class, not a string (STYLE.md rule 5)." },
      ],
      "import-x/no-restricted-paths": ["error", { zones: BOUNDARY_ZONES }],
      "import-x/no-cycle": ["error", { ignoreExternal: true }],
    },
  },
);
