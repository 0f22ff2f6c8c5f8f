/**
 * Agent settings a scenario needs beyond the drill's (e.g. the repair ladder acting,
 * `LLMHA_REPAIR_MODE=act`): an agent reads its settings at start, so a change restarts the
 * running agents one at a time (SIGTERM: each drains and leaves the registry; its inference
 * server keeps serving), each back HEALTHY before the next. Stopped nodes (the standby's, spare
 * slots) get the settings at their next boot.
 */
import { sleep } from "../../agent/src/util/net";
import type { SimNode } from "../sim/sim-node";

/** How long one restarted agent may take to be HEALTHY again (a tsx start on a loaded 2-core host took over 20 s). */
const BACK_MS = 60_000;

export class AgentEnvSwitch {
  constructor(
    private readonly nodes: readonly SimNode[],
    private applied: Readonly<Record<string, string>> | null,
    private readonly progress: (line: string) => void,
  ) {}

  /** Settings now applied on top of the drill's (null: none). */
  get current(): Readonly<Record<string, string>> | null {
    return this.applied;
  }

  /** Applies `env` (null: back to the drill's own); false when an agent was not HEALTHY again in time. */
  async set(env: Readonly<Record<string, string>> | null): Promise<boolean> {
    if (same(env, this.applied)) return true;
    const before = this.applied ?? {};
    this.applied = env;
    const names = Object.keys({ ...before, ...env }).sort().join(", ");
    const running = this.nodes.filter((n) => n.running);
    this.progress(`agent settings ${names}: ${env ? "set" : "back to the drill's"}; restarting ${running.length} agents one at a time`);
    let ok = true;
    for (const n of this.nodes) {
      const next: Record<string, string> = { ...n.opts.env };
      for (const k of Object.keys(before)) delete next[k];
      n.opts.env = { ...next, ...env };
    }
    for (const n of running) {
      try {
        await n.stopAgent();
        await n.startAgent();
        // Halted by the cloud meanwhile (a standby released): no agent now, the settings apply at its next boot.
        if (n.halted) {
          this.progress(`  ${n.id}: halted by the cloud during its restart; the settings apply at its next boot`);
          continue;
        }
      } catch (err) {
        // The local cloud may stop a node meanwhile (a standby released): it gets the settings at its next boot.
        await sleep(2000);
        if (!n.running) {
          this.progress(`  ${n.id}: stopped by the cloud during its restart; the settings apply at its next boot`);
          continue;
        }
        ok = false;
        this.progress(`  ${n.id}: agent restart failed: ${(err as Error).message.split("\n")[0]}`);
        continue;
      }
      const end = Date.now() + BACK_MS;
      let healthy = false;
      while (!healthy && Date.now() < end) {
        healthy = await n.agentGet("/readyz").then((r) => r.body.status === "HEALTHY", () => false);
        if (!healthy) await sleep(200);
      }
      if (!healthy) {
        ok = false;
        this.progress(`  ${n.id}: agent not HEALTHY ${BACK_MS / 1000} s after its restart`);
      }
    }
    return ok;
  }
}

function same(a: Readonly<Record<string, string>> | null, b: Readonly<Record<string, string>> | null): boolean {
  const x = a ?? {};
  const y = b ?? {};
  const keys = new Set([...Object.keys(x), ...Object.keys(y)]);
  return [...keys].every((k) => x[k] === y[k]);
}
