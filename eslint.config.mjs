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
 * Inside agent/src the folders say where each part runs (docs/architecture.md):
 *   node/       on every GPU node (sources, evaluator, reporters, canaries): never the controller,
 *               the actuators, the edge or the operator commands;
 *   fleet/      Redis and the elected controller with its actuators: never the edge or ops;
 *   edge/       the L1 pod (L4 fallback, key sync): Redis only, never node/, the controller or ops;
 *   ops/        operator commands: may read everything;
 *   util/       the leaf every part shares.
 */
export const BOUNDARY_ZONES = [
  { target: "./contracts", from: ".", except: ["./contracts", "./node_modules"], message: "contracts/ is the shared leaf: it imports no other folder." },
  { target: "./agent/src", from: ["./infra", "./policies", "./test", "./lab"], message: "agent/src is what the image runs: it imports contracts/ only (docs/architecture.md)." },
  { target: "./infra", from: ["./agent", "./policies", "./test", "./lab"], message: "infra/ imports contracts/ only (docs/architecture.md)." },
  { target: "./policies", from: ["./agent", "./test", "./lab"], message: "policies/ imports contracts/ only (docs/architecture.md)." },
  { target: "./policies", from: "./infra", except: ["./capture.ts"], message: "policies/ imports contracts/ only; its offline CLI may run infra/capture (docs/architecture.md)." },
  { target: "./lab", from: ["./policies", "./test"], message: "the lab imports the runtime and contracts, never policies or tests." },
  { target: "./agent/src/node", from: ["./agent/src/fleet/controller", "./agent/src/fleet/actuators", "./agent/src/edge", "./agent/src/ops"], message: "agent/src/node runs on every GPU node: it never imports the controller, the actuators, the edge or operator commands." },
  { target: "./agent/src/fleet", from: ["./agent/src/edge", "./agent/src/ops"], message: "agent/src/fleet (Redis, controller, actuators) never imports the edge or operator commands." },
  { target: "./agent/src/edge", from: ["./agent/src/node", "./agent/src/fleet/controller", "./agent/src/fleet/actuators", "./agent/src/ops"], message: "agent/src/edge runs in the L1 pod: Redis and util only, never node/, the controller, the actuators or ops." },
  { target: "./agent/src/util", from: "./agent/src", except: ["./util"], message: "agent/src/util is the runtime's leaf: it imports no other folder of agent/src." },
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
