/**
 * An in-memory fleet for the rollout's tests: what each node serves (its revision), switched by
 * `switch` at once or after `loadMs`; every call recorded; `failNext` makes the next call fail.
 */
import type { Revision, RolloutActuator, RolloutSwitchRequest, RolloutSwitchResult } from "../rollout/types";

export class MemoryRolloutActuator implements RolloutActuator {
  readonly kind = "memory";
  /** Node id → the revision it serves now. */
  readonly serving = new Map<string, Revision>();
  /** Node id → the revision it was last asked for (it serves it once loaded). */
  readonly wanted = new Map<string, Revision>();
  /** Every call made, in order: `<az>:<node,node>→<revision>`. */
  readonly calls: string[] = [];
  /** Fails the next call (then cleared). */
  failNext = false;
  /** How long a node takes to load a revision (ms); 0: at once. */
  loadMs = 0;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(readonly granularity: "node" | "az" = "node") {}

  revisionOf(nodeId: string, fallback: string): string {
    return this.serving.get(nodeId)?.revision ?? fallback;
  }

  switch(req: RolloutSwitchRequest): Promise<RolloutSwitchResult> {
    this.calls.push(`${req.az}:${req.nodes.map((n) => n.nodeId).join(",")}→${req.to.revision}`);
    if (this.failNext) {
      this.failNext = false;
      return Promise.resolve({ outcome: "failed", detail: "switch failed (injected)" });
    }
    const changed = req.nodes.filter((n) => this.wanted.get(n.nodeId)?.revision !== req.to.revision || this.wanted.get(n.nodeId)?.image !== req.to.image);
    for (const n of changed) {
      this.wanted.set(n.nodeId, req.to);
      if (this.loadMs <= 0) this.serving.set(n.nodeId, req.to);
      else {
        const t = setTimeout(() => {
          this.timers.delete(t);
          if (this.wanted.get(n.nodeId) === req.to) this.serving.set(n.nodeId, req.to);
        }, this.loadMs);
        this.timers.add(t);
      }
    }
    return Promise.resolve(changed.length ? { outcome: "applied", detail: `${changed.map((n) => n.nodeId).join(",")} → ${req.to.revision}` } : { outcome: "already", detail: `already asked for ${req.to.revision}` });
  }

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
