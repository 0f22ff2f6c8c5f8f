/**
 * The local cloud's AWS FIS, for `llm-ha gameday --local`: it answers the calls the game-day
 * runner makes of AWS (the same `@aws-sdk/client-fis` client, pointed here) for the drill
 * scenarios that have a fault to offer, so the runner that a real game day uses is the one the
 * lab runs and the tests drive.
 *
 * | request                           | what it does                                              |
 * |-----------------------------------|-----------------------------------------------------------|
 * | `GET /experimentTemplates`        | one template per offered scenario, tagged as `llm-ha:gameday` tags them (`llm-ha.io/gameday`, `Environment=drill`) |
 * | `GET /experimentTemplates/ID`     | that template                                             |
 * | `POST /experiments {experimentTemplateId, clientToken}` | starts it: `initiating`, the fault injected, `running` for the hold, healed, `completed`; the same client token starts nothing twice |
 * | `GET /experiments/ID`             | where it stands, with its actions' start and end          |
 * | `DELETE /experiments/ID`          | stops it: healed at once, `stopped`                       |
 *
 * Stop conditions: each template names its stop alarm as the stack's does; the drill evaluates
 * it from its own DNS answers (`alarm`), and an experiment whose alarm fires is healed and
 * `stopped` with the alarm's name, as FIS does.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { GAMEDAY_TAG } from "../../contracts/gameday";

/** A fault the drill can inject and heal on its own world. */
export interface LocalFault {
  inject(): Promise<void>;
  heal(): Promise<void>;
}

export interface OfferedScenario {
  scenario: string;
  description: string;
  /** FIS action names, as the stack's template has them. */
  actions: string[];
  /** The stop alarm's name (`<cluster>-gameday-stop-<kind>`). */
  stopAlarm: string;
  /** A new fault for each experiment. */
  fault(): LocalFault;
}

interface LocalExperiment {
  id: string;
  templateId: string;
  clientToken: string;
  status: "initiating" | "running" | "stopping" | "completed" | "stopped" | "failed";
  reason: string;
  startTime: number;
  endTime: number | null;
  actionsStart: number | null;
  actionsEnd: number | null;
  actionStatus: string;
  stop(reason: string): void;
}

export interface LocalFisOptions {
  /** How long each experiment holds its fault (a drill second stands for a production minute). */
  holdMs: number;
  /** The stop alarm firing now, by name; null while it is not. Evaluated every second while an experiment runs. */
  alarm?(name: string): boolean;
  log?(line: string): void;
}

const EPOCH_S = (ms: number | null): number | undefined => (ms === null ? undefined : ms / 1000);

export class LocalFis {
  private readonly offered = new Map<string, OfferedScenario & { id: string }>();
  private readonly experiments = new Map<string, LocalExperiment>();
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly o: LocalFisOptions) {}

  /** Offers a scenario's template; returns its id. */
  offer(s: OfferedScenario): string {
    const id = `EXTlocal${s.scenario.replace(/[^a-z0-9]/gi, "")}`;
    this.offered.set(id, { ...s, id });
    return id;
  }

  private template(t: OfferedScenario & { id: string }): object {
    return {
      id: t.id,
      description: t.description,
      tags: { [GAMEDAY_TAG]: t.scenario, Environment: "drill", Project: "llm-ha" },
      actions: Object.fromEntries(t.actions.map((a) => [a, { actionId: "local", targets: {} }])),
      stopConditions: [{ source: "aws:cloudwatch:alarm", value: `arn:aws:cloudwatch:local:000000000000:alarm:${t.stopAlarm}` }],
    };
  }

  private view(e: LocalExperiment): object {
    const t = this.offered.get(e.templateId)!;
    return {
      id: e.id,
      experimentTemplateId: e.templateId,
      state: { status: e.status, reason: e.reason },
      actions: Object.fromEntries(t.actions.map((a) => [a, { actionId: "local", state: { status: e.actionStatus, reason: "" }, startTime: EPOCH_S(e.actionsStart), endTime: EPOCH_S(e.actionsEnd) }])),
      startTime: EPOCH_S(e.startTime),
      endTime: EPOCH_S(e.endTime),
      tags: {},
    };
  }

  /** The answer to a FIS call, or null when the path is not FIS's. */
  async answer(req: IncomingMessage): Promise<{ code: number; body: object } | null> {
    const url = new URL(req.url ?? "", "http://x");
    const parts = url.pathname.split("/").filter(Boolean);
    if (parts[0] === "experimentTemplates") {
      if (req.method !== "GET") return { code: 405, body: { message: "read only" } };
      if (parts.length === 1) return { code: 200, body: { experimentTemplates: [...this.offered.values()].map((t) => this.template(t)) } };
      const t = this.offered.get(parts[1]);
      return t ? { code: 200, body: { experimentTemplate: this.template(t) } } : { code: 404, body: { message: `Experiment template ${parts[1]} not found` } };
    }
    if (parts[0] !== "experiments") return null;
    if (req.method === "POST" && parts.length === 1) {
      let body: { experimentTemplateId?: unknown; clientToken?: unknown };
      try {
        let raw = "";
        for await (const c of req) raw += String(c);
        body = JSON.parse(raw) as typeof body;
      } catch {
        return { code: 400, body: { message: "body must be JSON" } };
      }
      const t = this.offered.get(String(body.experimentTemplateId ?? ""));
      if (!t) return { code: 404, body: { message: `Experiment template ${String(body.experimentTemplateId)} not found` } };
      const token = String(body.clientToken ?? "");
      const again = [...this.experiments.values()].find((e) => token && e.clientToken === token);
      return { code: 200, body: { experiment: this.view(again ?? this.start(t, token)) } };
    }
    const e = this.experiments.get(parts[1] ?? "");
    if (!e) return { code: 404, body: { message: `Experiment ${parts[1]} not found` } };
    if (req.method === "GET") return { code: 200, body: { experiment: this.view(e) } };
    if (req.method === "DELETE") {
      e.stop("Experiment stopped by user.");
      return { code: 200, body: { experiment: this.view(e) } };
    }
    return { code: 405, body: { message: `${req.method} not allowed` } };
  }

  private start(t: OfferedScenario & { id: string }, clientToken: string): LocalExperiment {
    let stopWith: ((reason: string) => void) | null = null;
    const stopped = new Promise<string>((r) => (stopWith = r));
    const e: LocalExperiment = {
      id: `EXP${randomUUID().replace(/-/g, "").slice(0, 17)}`, templateId: t.id, clientToken, status: "initiating", reason: "Experiment is initiating.",
      startTime: Date.now(), endTime: null, actionsStart: null, actionsEnd: null, actionStatus: "pending",
      stop: (reason) => stopWith?.(reason),
    };
    this.experiments.set(e.id, e);
    const fault = t.fault();
    const run = (async () => {
      let healed = false;
      try {
        e.actionsStart = Date.now();
        e.actionStatus = "running";
        await fault.inject();
        e.status = "running";
        e.reason = "Experiment is running.";
        this.o.log?.(`local FIS: ${t.scenario} ${e.id} running (holds ${this.o.holdMs / 1000} s)`);
        const alarmWatch = setInterval(() => {
          if (this.o.alarm?.(t.stopAlarm)) e.stop(`Experiment stopped by a stop condition: alarm ${t.stopAlarm} is in ALARM.`);
        }, 1000);
        const why = await Promise.race([stopped, new Promise<null>((r) => setTimeout(() => r(null), this.o.holdMs))]);
        clearInterval(alarmWatch);
        if (why !== null) {
          e.status = "stopping";
          e.reason = why;
        }
        // The action ends when its fault is lifted (the drill marks its heal there too); the restart after it is the system's to recover from.
        e.actionsEnd = Date.now();
        await fault.heal();
        healed = true;
        e.actionStatus = why === null ? "completed" : "stopped";
        e.status = why === null ? "completed" : "stopped";
        e.reason = why ?? "Experiment completed.";
      } catch (err) {
        if (!healed) await fault.heal().catch(() => undefined);
        e.actionsEnd ??= Date.now();
        e.actionStatus = "failed";
        e.status = "failed";
        e.reason = `Experiment failed: ${(err as Error).message}`;
      } finally {
        e.endTime = Date.now();
        this.o.log?.(`local FIS: ${t.scenario} ${e.id} ${e.status}: ${e.reason}`);
      }
    })();
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return e;
  }

  /** Stops every experiment still running and waits for their heals. */
  async stop(): Promise<void> {
    for (const e of this.experiments.values()) e.stop("The local cloud is stopping.");
    await Promise.allSettled([...this.running]);
  }
}
