/**
 * The game day's AWS FIS calls, through AWS's own client: find the stack's template for a
 * scenario by its tags (never by a name someone typed), start an experiment, read where it
 * stands, stop it. The same calls reach AWS (`llm-ha gameday --stack ENV`) and the drill's local
 * cloud (`--local`, which answers them for its own scenarios, lab/drill/local-fis.ts).
 */
import {
  GetExperimentCommand,
  ListExperimentTemplatesCommand,
  StartExperimentCommand,
  StopExperimentCommand,
  type Experiment,
  type FisClient,
} from "@aws-sdk/client-fis";
import { GAMEDAY_TAG } from "../../contracts/gameday";

export class GamedayError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GamedayError";
  }
}

/** FIS's experiment states that do not change any more. */
export const TERMINAL_STATES: ReadonlySet<string> = new Set(["completed", "stopped", "failed", "cancelled"]);

export interface FoundTemplate {
  id: string;
  description: string;
}

/**
 * The one template of `scenario` in `environment` (tags `llm-ha.io/gameday` and `Environment`,
 * as `llm-ha:gameday` sets them). None, or more than one, is an error that says what was found.
 */
export async function findTemplate(fis: FisClient, scenario: string, environment: string): Promise<FoundTemplate> {
  const found: FoundTemplate[] = [];
  const ours: string[] = [];
  let nextToken: string | undefined;
  do {
    const page = await fis.send(new ListExperimentTemplatesCommand({ maxResults: 100, nextToken }));
    for (const t of page.experimentTemplates ?? []) {
      const tags = t.tags ?? {};
      if (tags.Environment === environment && tags[GAMEDAY_TAG]) ours.push(`${tags[GAMEDAY_TAG]} (${t.id})`);
      if (tags.Environment === environment && tags[GAMEDAY_TAG] === scenario && t.id) found.push({ id: t.id, description: t.description ?? "" });
    }
    nextToken = page.nextToken;
  } while (nextToken);
  if (found.length === 1) return found[0];
  if (found.length > 1) throw new GamedayError(`${found.length} FIS templates are tagged ${GAMEDAY_TAG}=${scenario}, Environment=${environment} (${found.map((f) => f.id).join(", ")}): one is expected; delete the strays`);
  throw new GamedayError(
    `no FIS template tagged ${GAMEDAY_TAG}=${scenario}, Environment=${environment}` +
      (ours.length ? ` (the stack's game-day templates: ${ours.join(", ")})` : ": set llm-ha:gameday.enabled to true in the stack file and run pulumi up"),
  );
}

/** An experiment as the runner follows it: its state, and when its actions ran (epoch ms). */
export interface ExperimentView {
  id: string;
  status: string;
  reason: string;
  /** The first action's start, the last action's end (epoch ms); null until known. */
  actionsStartedAt: number | null;
  actionsEndedAt: number | null;
  endedAt: number | null;
  actions: { name: string; status: string; reason: string }[];
}

function ms(d: Date | undefined): number | null {
  return d instanceof Date && !Number.isNaN(d.getTime()) ? d.getTime() : null;
}

export function viewOf(e: Experiment | undefined): ExperimentView {
  if (!e?.id) throw new GamedayError("FIS answered without an experiment");
  const actions = Object.entries(e.actions ?? {}).map(([name, a]) => ({ name, status: a.state?.status ?? "", reason: a.state?.reason ?? "", start: ms(a.startTime), end: ms(a.endTime) }));
  const starts = actions.map((a) => a.start).filter((x): x is number => x !== null);
  const ends = actions.map((a) => a.end).filter((x): x is number => x !== null);
  const allEnded = actions.length > 0 && ends.length === actions.length;
  return {
    id: e.id,
    status: e.state?.status ?? "unknown",
    reason: e.state?.reason ?? "",
    actionsStartedAt: starts.length ? Math.min(...starts) : null,
    actionsEndedAt: allEnded ? Math.max(...ends) : null,
    endedAt: ms(e.endTime),
    actions: actions.map(({ name, status, reason }) => ({ name, status, reason })),
  };
}

/** Starts the template; `runId` is the idempotency token (a retried start never starts twice) and a tag. */
export async function startExperiment(fis: FisClient, templateId: string, runId: string): Promise<ExperimentView> {
  const r = await fis.send(new StartExperimentCommand({ experimentTemplateId: templateId, clientToken: runId, tags: { "llm-ha.io/gameday-run": runId } }));
  return viewOf(r.experiment);
}

export async function getExperiment(fis: FisClient, id: string): Promise<ExperimentView> {
  return viewOf((await fis.send(new GetExperimentCommand({ id }))).experiment);
}

export async function stopExperiment(fis: FisClient, id: string): Promise<ExperimentView> {
  return viewOf((await fis.send(new StopExperimentCommand({ id }))).experiment);
}
