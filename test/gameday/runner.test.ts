// The game-day runner against a mocked AWS FIS (the SDK client itself, mocked with
// aws-sdk-client-mock) and a scripted view of the public answer and the fleet: it finds the
// template by the stack's tags, refuses an unsteady fleet, starts once with its run id as the
// idempotency token, follows the experiment to its end, stops it when asked or when it fails
// itself, and judges what it saw with the drill's targets.
import { FisClient, GetExperimentCommand, ListExperimentTemplatesCommand, StartExperimentCommand, StopExperimentCommand, type Experiment } from "@aws-sdk/client-fis";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { GamedayError } from "../../lab/gameday/fis";
import { gamedayTargets } from "../../lab/gameday/judge";
import { runGameday, type GamedayView } from "../../lab/gameday/runner";
import type { FleetSample } from "../../lab/drill/timeline";

// The FIS client (3.523) is older than the @smithy types aws-sdk-client-mock is built on: same runtime shape, types told apart.
interface LooseStub {
  on(c: unknown): { resolves(v: unknown): unknown; rejects(e: unknown): unknown; callsFake(f: (input: unknown) => unknown): unknown };
  reset(): void;
  commandCalls(c: unknown): { args: [{ input: Record<string, unknown> }] }[];
}
const fisMock = mockClient(FisClient as unknown as Parameters<typeof mockClient>[0]) as unknown as LooseStub;
const fis = new FisClient({ region: "us-east-1", credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" } });
const ACTIVE = ["us-east-1a", "us-east-1b", "us-east-1c"];

const TEMPLATES = [
  { id: "EXTother", tags: { "llm-ha.io/gameday": "az-power-interruption", Environment: "staging" } },
  { id: "EXTgpu", tags: { "llm-ha.io/gameday": "gpu-lost", Environment: "prod" } },
  { id: "EXTaz", description: "power in us-east-1a", tags: { "llm-ha.io/gameday": "az-power-interruption", Environment: "prod" } },
];

/**
 * A world on the runner's clock: the fault takes us-east-1a out of the answer and its state to
 * DOWN, and the leader moves, from `faultAt`; everything is back from `healAt`. Times are
 * wall-clock ms (the FIS mock reports the actions' times the same way).
 */
function scriptedView(w: { faultAt: () => number | null; healAt: () => number | null; steady?: boolean }): GamedayView {
  const faulted = (): boolean => {
    const f = w.faultAt();
    const h = w.healAt();
    return f !== null && Date.now() >= f && (h === null || Date.now() < h);
  };
  return {
    servingAzs: async () => (w.steady === false ? ["us-east-1a", "us-east-1b"] : faulted() ? ["us-east-1b", "us-east-1c"] : [...ACTIVE]),
    fleet: async (): Promise<Omit<FleetSample, "t">> => ({
      azState: Object.fromEntries(ACTIVE.map((a) => [a, a === "us-east-1a" && faulted() ? "DOWN" : "OK"])),
      tier: "L0",
      leader: w.faultAt() !== null && Date.now() >= w.faultAt()! ? "ctrl-2" : "ctrl-1",
      leaderToken: w.faultAt() !== null && Date.now() >= w.faultAt()! ? 8 : 7,
      tokens: {},
      standbyWake: false,
      suspect: "",
    }),
    close: async () => undefined,
  };
}

function experiment(o: { status: string; reason?: string; start?: number; end?: number }): Experiment {
  return {
    id: "EXP1",
    experimentTemplateId: "EXTaz",
    state: { status: o.status as never, reason: o.reason ?? "" },
    actions: { StopAzInstances: { state: { status: (o.end ? "completed" : o.start ? "running" : "pending") as never, reason: "" }, startTime: o.start ? new Date(o.start) : undefined, endTime: o.end ? new Date(o.end) : undefined } },
    endTime: o.end ? new Date(o.end) : undefined,
  };
}

const base = () => {
  const t0 = Date.now();
  return { fis, scenario: "az-power-interruption", environment: "prod", az: "us-east-1a", activeAzs: ACTIVE, clients: [], model: "m", requestTimeoutMs: 1000, now: () => Date.now() - t0, progress: () => undefined, sampleMs: 50, pollMs: 50, leadMs: 100, steadyWaitMs: 1500, recoveryWaitMs: 3000 };
};

describe("game-day runner against a mocked FIS", () => {
  beforeEach(() => {
    fisMock.reset();
    fisMock.on(ListExperimentTemplatesCommand).resolves({ experimentTemplates: TEMPLATES });
  });

  it("finds the stack's template by its tags, starts it once, follows it to completed, and judges the run with the drill's targets", async () => {
    let faultAt: number | null = null;
    let healAt: number | null = null;
    let polls = 0;
    fisMock.on(StartExperimentCommand).callsFake(() => {
      faultAt = Date.now() + 100;
      return { experiment: experiment({ status: "initiating" }) };
    });
    fisMock.on(GetExperimentCommand).callsFake(() => {
      polls++;
      if (Date.now() < faultAt! + 800) return { experiment: experiment({ status: "running", start: faultAt! }) };
      healAt ??= Date.now();
      return { experiment: experiment({ status: "completed", reason: "Experiment completed.", start: faultAt!, end: healAt }) };
    });
    const asked: number[][] = [];
    const prometheus = {
      fired: async (from: number, to: number) => {
        asked.push([from, to]);
        return [{ alertname: "LlmhaAzCapacityLow", labels: { az: "us-east-1a" }, firstMs: from + 500, lastMs: to, carried: false }];
      },
    };
    const run = await runGameday({ ...base(), view: scriptedView({ faultAt: () => faultAt, healAt: () => healAt }), prometheus });
    // The alerts that fired from the fault to the end, read once, in the report.
    expect(asked).toHaveLength(1);
    expect(asked[0][0]).toBeGreaterThanOrEqual(faultAt! - 100);
    expect(asked[0][0]).toBeLessThanOrEqual(faultAt! + 100);
    expect(run.result.extra.alerts).toBe("LlmhaAzCapacityLow{az=us-east-1a}");
    const starts = fisMock.commandCalls(StartExperimentCommand);
    expect(starts).toHaveLength(1);
    expect(starts[0].args[0].input).toMatchObject({ experimentTemplateId: "EXTaz", clientToken: run.runId });
    expect(run.templateId).toBe("EXTaz");
    expect(run.experiment.status).toBe("completed");
    expect(run.stoppedEarly).toBe(false);
    expect(polls).toBeGreaterThan(1);
    // The AZ left the public answer and its state went DOWN after the fault; a new leader; back after the heal.
    expect(run.result.dnsMs).not.toBeNull();
    expect(run.result.detectMs).not.toBeNull();
    expect(run.result.leaderMs).not.toBeNull();
    expect(run.result.recoveryMs).not.toBeNull();
    expect(run.result.falseFailovers).toBe(0);
    expect(run.result.extra.healthyWorsened).toBe(0);
    expect(run.result.extra.tokenRegressions).toBe(0);
    expect(fisMock.commandCalls(StopExperimentCommand)).toHaveLength(0);
  });

  it("refuses to start on a fleet that is not steady, and says why", async () => {
    fisMock.on(StartExperimentCommand).resolves({ experiment: experiment({ status: "initiating" }) });
    await expect(runGameday({ ...base(), steadyWaitMs: 400, view: scriptedView({ faultAt: () => null, healAt: () => null, steady: false }) })).rejects.toThrow(/not steady \(not served: us-east-1c\)/);
    expect(fisMock.commandCalls(StartExperimentCommand)).toHaveLength(0);
  });

  it("names the stack's templates when none is tagged for the scenario", async () => {
    const err = await runGameday({ ...base(), scenario: "redis-latency", view: scriptedView({ faultAt: () => null, healAt: () => null }) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GamedayError);
    expect((err as Error).message).toMatch(/no FIS template tagged llm-ha\.io\/gameday=redis-latency, Environment=prod \(the stack's game-day templates: gpu-lost \(EXTgpu\), az-power-interruption \(EXTaz\)\)/);
  });

  it("stops the experiment when asked (Ctrl-C) and reports it stopped early", async () => {
    const abort = new AbortController();
    let status = "running";
    const start = Date.now();
    fisMock.on(StartExperimentCommand).resolves({ experiment: experiment({ status: "initiating" }) });
    fisMock.on(GetExperimentCommand).callsFake(() => ({ experiment: experiment({ status, start, ...(status === "stopped" ? { end: Date.now(), reason: "Experiment stopped by user." } : {}) }) }));
    fisMock.on(StopExperimentCommand).callsFake(() => {
      status = "stopped";
      return { experiment: experiment({ status: "stopping", start }) };
    });
    setTimeout(() => abort.abort(), 600);
    const run = await runGameday({ ...base(), signal: abort.signal, view: scriptedView({ faultAt: () => null, healAt: () => null }) });
    expect(fisMock.commandCalls(StopExperimentCommand)).toHaveLength(1);
    expect(run.stoppedEarly).toBe(true);
    expect(run.experiment.reason).toMatch(/stopped by user/);
  });

  it("stops a started experiment when the runner itself fails while following it", async () => {
    fisMock.on(StartExperimentCommand).resolves({ experiment: experiment({ status: "initiating" }) });
    fisMock.on(GetExperimentCommand).rejects(new Error("ThrottlingException: Rate exceeded"));
    fisMock.on(StopExperimentCommand).resolves({ experiment: experiment({ status: "stopping" }) });
    await expect(runGameday({ ...base(), view: scriptedView({ faultAt: () => null, healAt: () => null }) })).rejects.toThrow(/Rate exceeded/);
    expect(fisMock.commandCalls(StopExperimentCommand)).toHaveLength(1);
  });
});

describe("the drill's targets on a game day", () => {
  it("keeps what the game day measures and names what only the lab can", () => {
    const { targets, labOnly } = gamedayTargets({ dnsMs: 5000, leaderMs: 9000, l1Ms: 2000, staleWrites: 0, tokenRegressions: 0, extraCounts: { healthyWorsened: 0, l4Entered: 0, queueFailed: 0 } });
    expect(targets).toEqual({ dnsMs: 5000, leaderMs: 9000, staleWrites: 0, tokenRegressions: 0, extraCounts: { healthyWorsened: 0, l4Entered: 0 } });
    expect(labOnly.sort()).toEqual(["l1Ms", "queueFailed"]);
  });
});
