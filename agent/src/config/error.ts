import { flagOf } from "./spec";

/** A bad setting: names the variable and its flag. `llm-ha agent` exits 2 on it. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    // "argv" is the command line itself (an unknown flag), which has no variable to name.
    super(variable === "argv" ? message : `${variable} (${flagOf(variable)}): ${message}`);
    this.name = "ConfigError";
  }
}
