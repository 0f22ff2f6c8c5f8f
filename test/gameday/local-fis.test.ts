// The local cloud's AWS FIS, driven by AWS's own client over real HTTP: the drill offers a
// fault as a template tagged like the stack's; an experiment injects it, holds it, heals it and
// completes; the same client token never starts it twice; a stop (by hand, or by the stop
// alarm) heals at once and says why; a fault that fails to inject is healed and reported failed.
import { FisClient, GetExperimentCommand, ListExperimentTemplatesCommand, StartExperimentCommand, StopExperimentCommand } from "@aws-sdk/client-fis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LocalCloud } from "../../lab/drill/local-cloud";
import { waitFor } from "../../agent/src/util/net";
import { findTemplate, getExperiment, TERMINAL_STATES } from "../../lab/gameday/fis";

let cloud: LocalCloud;
let fis: FisClient;
let events: string[];
let alarmOn = false;

beforeEach(async () => {
  events = [];
  alarmOn = false;
  cloud = new LocalCloud({ now: () => Date.now() });
  await cloud.listen();
  fis = new FisClient({ region: "local", endpoint: cloud.url, credentials: { accessKeyId: "local", secretAccessKey: "local" }, maxAttempts: 1 });
});

afterEach(async () => {
  await cloud.stop();
});

function offer(holdMs: number, fault: { failInject?: boolean } = {}): string {
  const local = cloud.enableFis({ holdMs, alarm: (name) => alarmOn && name.endsWith("beyondOneAz") });
  return local.offer({
    scenario: "az-power-interruption",
    description: "power in az-a",
    actions: ["LocalFault"],
    stopAlarm: "drill-gameday-stop-beyondOneAz",
    fault: () => ({
      inject: async () => {
        events.push("inject");
        if (fault.failInject) throw new Error("no Redis primary in az-a");
      },
      heal: async () => void events.push("heal"),
    }),
  });
}

async function ended(id: string): Promise<string> {
  await waitFor(`experiment ${id} to end`, async () => TERMINAL_STATES.has((await getExperiment(fis, id)).status), { everyMs: 50 });
  return (await getExperiment(fis, id)).status;
}

describe("the local cloud's FIS", () => {
  it("lists the offered template with the stack's tags, and the runner finds it by them", async () => {
    const id = offer(200);
    const list = await fis.send(new ListExperimentTemplatesCommand({}));
    expect(list.experimentTemplates?.map((t) => [t.id, t.tags])).toEqual([[id, { "llm-ha.io/gameday": "az-power-interruption", Environment: "drill", Project: "llm-ha" }]]);
    expect((await findTemplate(fis, "az-power-interruption", "drill")).id).toBe(id);
  });

  it("injects, holds, heals and completes; a second start with the same token is the same experiment", async () => {
    const id = offer(300);
    const a = await fis.send(new StartExperimentCommand({ experimentTemplateId: id, clientToken: "run-1" }));
    const b = await fis.send(new StartExperimentCommand({ experimentTemplateId: id, clientToken: "run-1" }));
    expect(b.experiment?.id).toBe(a.experiment?.id);
    expect(await ended(a.experiment!.id!)).toBe("completed");
    expect(events).toEqual(["inject", "heal"]);
    const e = (await fis.send(new GetExperimentCommand({ id: a.experiment!.id! }))).experiment!;
    const act = e.actions!.LocalFault;
    expect(act.state?.status).toBe("completed");
    expect(act.endTime!.getTime() - act.startTime!.getTime()).toBeGreaterThanOrEqual(250);
  });

  it("a stop heals at once and says who stopped it", async () => {
    const id = offer(60_000);
    const a = await fis.send(new StartExperimentCommand({ experimentTemplateId: id, clientToken: "run-2" }));
    await waitFor("the experiment running", async () => (await getExperiment(fis, a.experiment!.id!)).status === "running", { everyMs: 50 });
    await fis.send(new StopExperimentCommand({ id: a.experiment!.id! }));
    expect(await ended(a.experiment!.id!)).toBe("stopped");
    expect((await getExperiment(fis, a.experiment!.id!)).reason).toMatch(/stopped by user/);
    expect(events).toEqual(["inject", "heal"]);
  });

  it("its stop alarm firing stops the experiment with the alarm's name", async () => {
    const id = offer(60_000);
    const a = await fis.send(new StartExperimentCommand({ experimentTemplateId: id, clientToken: "run-3" }));
    alarmOn = true;
    expect(await ended(a.experiment!.id!)).toBe("stopped");
    expect((await getExperiment(fis, a.experiment!.id!)).reason).toMatch(/stop condition: alarm drill-gameday-stop-beyondOneAz/);
    expect(events).toEqual(["inject", "heal"]);
  });

  it("a fault that fails to inject is healed and the experiment failed", async () => {
    const id = offer(200, { failInject: true });
    const a = await fis.send(new StartExperimentCommand({ experimentTemplateId: id, clientToken: "run-4" }));
    expect(await ended(a.experiment!.id!)).toBe("failed");
    expect((await getExperiment(fis, a.experiment!.id!)).reason).toMatch(/no Redis primary in az-a/);
    expect(events).toEqual(["inject", "heal"]);
  });

  it("an unknown template is FIS's 404, through the client", async () => {
    offer(200);
    await expect(fis.send(new StartExperimentCommand({ experimentTemplateId: "EXTnope", clientToken: "x" }))).rejects.toThrow(/EXTnope not found/);
  });
});
