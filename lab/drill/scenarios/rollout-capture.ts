/**
 * What an operator sees of a rollout in the drill, captured from the real CLI (the image's
 * `llm-ha`, its own process, logged in as the operator's and the reader's Redis roles): the
 * `llm-ha rollout start` answer, `llm-ha rollout status` and `llm-ha status` while the second step
 * bakes, and `llm-ha rollout status` once it ended. Written to `rollout-capture.txt` in the
 * drill's log folder; docs/operations.md quotes it.
 */
import { appendFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { runLlmHa } from "../../cli-process";
import type { ScenarioContext } from "./runner";

export class RolloutCapture {
  readonly file: string;
  private started = false;

  constructor(private readonly ctx: ScenarioContext) {
    this.file = join(dirname(ctx.stack.nodes[0].opts.dir), "rollout-capture.txt");
  }

  /** `llm-ha rollout start` as the operator; false when the command refused or failed (the caller then writes the request itself). */
  async start(id: string, to: string): Promise<boolean> {
    const r = await this.run("operator", ["rollout", "start", "--to", to, "--id", id]);
    return r === 0;
  }

  /** Once: `llm-ha rollout status` and `llm-ha status` now. */
  async midway(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.run("reader", ["rollout", "status"]);
    await this.run("reader", ["status"]);
  }

  async end(): Promise<void> {
    await this.run("reader", ["rollout", "status"]);
  }

  private async run(role: "operator" | "reader", args: string[]): Promise<number | null> {
    const who = this.ctx.stack.redisAs(role === "operator" ? "llmha-operator" : "llmha-reader");
    const env = { ...who.env, LLMHA_REDIS_URL: who.url, LLMHA_CLUSTER: this.ctx.stack.cluster, NO_COLOR: "1" };
    const r = await runLlmHa(args, env).catch((err: Error) => ({ code: null, stdout: "", stderr: err.message }));
    const text = `$ llm-ha ${args.join(" ")}\n${r.stdout}${r.stderr}${r.code ? `(exit ${r.code})\n` : ""}\n`;
    if (!this.started && args[1] === "start") await writeFile(this.file, text);
    else await appendFile(this.file, text);
    return r.code;
  }
}
