/**
 * The repair ladder acting in the drill (`LLMHA_REPAIR_MODE=act`, the `local` repair actuator
 * over the local cloud's instances, lab/drill/local-instances.ts). Each run starts from a steady
 * fleet whose hosts were never repaired (the history is cleared: a reboot within 24 h would make
 * the next fault a quarantine), injects a GPU fault through the sim node's fault API (the fake
 * nvidia-smi's state, the kernel log the agent reads XIDs from), and lets the leader do the rest:
 *
 * - `repair-reboot`: XID 79 and the GPU off the bus → cordon, drain, reboot, HEALTHY, uncordon;
 * - `repair-replace`: a row-remap failure (a reboot keeps it) → cordon, drain, surge (a spare
 *   slot boots), the spare serving, the old host terminated;
 * - `repair-capacity-short`: the same with every launch failing with AWS's capacity message →
 *   the node stays drained, never terminated, held with the reason; the standby covers the AZ;
 * - `bad-host-returns`: XID 79 repaired by a reboot, then XID 48 within the window → quarantined
 *   (never back in rotation) and replaced;
 * - `repair-storm`: XID 79 on 5 nodes of one AZ → one repair at a time in the AZ, never a
 *   serving node taken below the AZ's floor.
 *
 * A run ends with the world as it began (lab/drill/local-instances.ts `reset`: a terminated
 * slot gets a fresh instance, a surged spare stops; an operator repairs a node left held).
 */
import { sleep } from "../../../agent/src/util/net";
import { FAULTED_GPU, NVSMI_FAULTS } from "../../sim/nvsmi-state";
import type { SimNode } from "../../sim/sim-node";
import type { LocalCloud } from "../local-cloud";
import type { ScenarioSpec } from "../scenarios";
import { DRILL_BOOT_MS, DRILL_REPAIR_ENV } from "../settings";
import { firstAfter, l1Removed, type Sample } from "../timeline";
import { effectiveSteps, maxInRepair, outOfOrder, RepairWatch, stepsOf, stepsText } from "./repair-watch";
import { blank, finish, healthy, mark, rowOf, standbyReady, steady, until, type RunResult, type ScenarioContext } from "./runner";

const fmt = (ms: number | null | undefined): string => (typeof ms !== "number" ? "never" : `${(ms / 1000).toFixed(1)}s`);
const REPLACEMENT_MS = Number(DRILL_REPAIR_ENV.LLMHA_REPAIR_REPLACEMENT_TIMEOUT_MS);

interface Run {
  r: RunResult;
  cloud: LocalCloud;
  watch: RepairWatch;
}

/** A steady fleet, the leader in act mode, no repair history or repair under way; null (with `r.notMeasured`) otherwise. */
async function prepare(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<Run | { r: RunResult; cloud?: undefined }> {
  const r = blank(spec.name, run);
  const sb = await standbyReady(ctx, r);
  if (!sb) return { r };
  const watch = new RepairWatch(ctx);
  const busy = await watch.resetHistory();
  if (busy) r.notes.push(`${busy} repair(s) under way before the run`);
  const mode = (await watch.read()).mode;
  if (mode !== "act") {
    await watch.stop();
    r.notMeasured = `the leader's repair plan is in ${mode || "no"} mode, not act (the repair scenarios' agent settings did not take)`;
    return { r };
  }
  watch.start();
  return { r, cloud: sb.cloud, watch };
}

/**
 * After the run's clean-up (a fresh instance booting, an operator's repair, the standby's hold and
 * release): the fleet steady again before the next run starts, or a note.
 */
async function backToSteady(ctx: ScenarioContext, r: RunResult): Promise<void> {
  if (!(await steady(ctx, 90_000))) r.notes.push("fleet not steady again 90 s after the run's clean-up");
}

/** The active AZs' nodes in service (not terminated), each run's victim taken in turn. */
let victimSeq = 0;
function pickVictim(ctx: ScenarioContext, cloud: LocalCloud): SimNode {
  const active = ctx.stack.nodes.filter((n) => !ctx.stack.azOf(n).standby && n.running && !cloud.instances.isTerminated(n.id));
  return active[victimSeq++ % active.length];
}

/** XID 79 in the kernel log and the GPU gone from nvidia-smi's listing: a GPU fell off the bus. */
async function offBus(n: SimNode): Promise<void> {
  await n.setGpu({ ...n.gpuState, ...NVSMI_FAULTS.gpuMissing });
  await n.xid(79);
}

const applied = (cloud: LocalCloud, n: SimNode, step: string, from: number): number | null =>
  stepsOf(cloud, n.id, from).find((a) => a.step === step && (a.outcome === "applied" || a.outcome === "already"))?.t ?? null;

/** Rebooted, HEALTHY and in rotation after the reboot, and uncordoned. */
function rebootedBack(ctx: ScenarioContext, cloud: LocalCloud, n: SimNode, from: number, s: Sample): boolean {
  const reboot = applied(cloud, n, "reboot", from);
  return reboot !== null && s.t > reboot && healthy(ctx, s, n) && applied(cloud, n, "uncordon", reboot) !== null && !cloud.instances.isCordoned(n.id);
}

/** Ms from `from` to the node's first HEALTHY (agent) after its reboot, null when none. */
function healthyAfterReboot(ctx: ScenarioContext, cloud: LocalCloud, n: SimNode, from: number, until: number): number | null {
  const reboot = applied(cloud, n, "reboot", from);
  if (reboot === null) return null;
  const ms = firstAfter(ctx.tl.samples, reboot, (s) => s.nodes[n.id]?.status === "HEALTHY", until);
  return ms === null ? null : reboot - from + ms;
}

/** A node serving: HEALTHY and UP with weight in an AZ proxy's serving backend. */
function serving(s: Sample, n: SimNode): boolean {
  return s.nodes[n.id]?.status === "HEALTHY" && Object.entries(s.l1).some(([k, v]) => /^az_.*_servers\//.test(k) && k.endsWith(`/${n.id}`) && v.status.startsWith("UP") && v.weight > 0);
}

/** The spare slot of the victim's AZ a surge booted (null: none). */
function surgedSpare(ctx: ScenarioContext, cloud: LocalCloud, az: string): SimNode | null {
  const booted = cloud.instances.launches.filter((l) => l.az === az && l.node).at(-1)?.node;
  return ctx.stack.spares.find((n) => n.id === booted) ?? null;
}

/** Replacement figures: surge, spare serving, old host terminated, and whether the order held. */
function replacementFigures(ctx: ScenarioContext, cloud: LocalCloud, r: RunResult, v: SimNode, from: number): string {
  const spare = surgedSpare(ctx, cloud, v.az);
  const surgeT = applied(cloud, v, "surge", from);
  const termT = applied(cloud, v, "terminate", from);
  const spareMs = spare ? firstAfter(ctx.tl.samples, from, (s) => serving(s, spare), r.endAt) : null;
  r.extra.surgeMs = surgeT === null ? null : surgeT - r.injectAt;
  r.extra.replacementServingMs = spareMs === null ? null : from - r.injectAt + spareMs;
  r.extra.terminateMs = termT === null ? null : termT - r.injectAt;
  // Capacity back before the old host goes: the replacement's agent HEALTHY when the termination reached the cloud.
  const term = cloud.instances.terminations.find((x) => x.node === v.id && x.t >= from);
  const requests = spare ? Math.max(0, ...Object.entries(ctx.tl.samples.at(-1)?.l1 ?? {}).filter(([k]) => /^az_.*_servers\//.test(k) && k.endsWith(`/${spare.id}`)).map(([, x]) => x.total)) : 0;
  r.extra.replacementAtTermination = term?.replacementStatus ?? null;
  r.extra.replacementRequests = requests;
  r.extra.notReplaced = spare && spareMs !== null && termT !== null ? 0 : 1;
  r.extra.terminatedBeforeReplacement = termT !== null && term?.replacementStatus !== "HEALTHY" ? 1 : 0;
  return (
    `surge ${fmt(r.extra.surgeMs)}, replacement ${spare?.id ?? "none"} serving ${fmt(r.extra.replacementServingMs as number | null)} (HEALTHY? ${term?.replacementStatus ?? "-"} when ${v.id}'s termination reached the cloud ` +
    `${fmt(r.extra.terminateMs)}; ${requests} requests through its AZ proxies by the end)`
  );
}

export async function runRepairReboot(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const p = await prepare(ctx, spec, run);
  if (!p.cloud) return p.r;
  const { r, cloud, watch } = p;
  const v = pickVictim(ctx, cloud);
  try {
    r.injectAt = mark(ctx, "inject", `${spec.name} ${v.id}: XID 79, GPU ${FAULTED_GPU} off the bus`);
    await offBus(v);
    if (!(await until(ctx, DRILL_BOOT_MS + 120_000, (s) => rebootedBack(ctx, cloud, v, r.injectAt, s)))) r.notes.push(`${v.id} not rebooted, HEALTHY and uncordoned within ${(DRILL_BOOT_MS + 120_000) / 1000} s`);
    r.healAt = mark(ctx, "heal", `${v.id} repaired`);
    await sleep(300);
    r.endAt = ctx.now();
    finish(ctx, r, [v], l1Removed);
    const acts = stepsOf(cloud, v.id, r.injectAt, r.endAt);
    r.extra.healthyMs = healthyAfterReboot(ctx, cloud, v, r.injectAt, r.endAt);
    r.extra.inRotationMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => rebootedBack(ctx, cloud, v, r.injectAt, s), r.endAt);
    r.extra.stepsOutOfOrder = outOfOrder(acts, ["cordon", "drain", "reboot", "uncordon"]);
    r.extra.notRepaired = r.extra.inRotationMs === null ? 1 : 0;
    r.extra.steps = stepsText(acts);
    r.extra.figures = `${v.id} (${cloud.instances.instanceOf(v.id)}): ${r.extra.steps}; HEALTHY ${fmt(r.extra.healthyMs)} after the fault (boot ${DRILL_BOOT_MS / 1000} s, target ≤ ${(DRILL_BOOT_MS + 60_000) / 1000} s), back in rotation and uncordoned ${fmt(r.extra.inRotationMs)}; failed requests ${r.failed}`;
  } finally {
    if (r.extra.notRepaired !== 0) await watch.operatorRepair(cloud, v, true);
    await watch.stop();
    await backToSteady(ctx, r);
  }
  return r;
}

export async function runRepairReplace(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const p = await prepare(ctx, spec, run);
  if (!p.cloud) return p.r;
  const { r, cloud, watch } = p;
  const v = pickVictim(ctx, cloud);
  const host = cloud.instances.instanceOf(v.id);
  try {
    r.injectAt = mark(ctx, "inject", `${spec.name} ${v.id}: row-remap failure on GPU ${FAULTED_GPU}`);
    await v.gpuFault("rowRemapFailure");
    const replaced = (s: Sample): boolean => cloud.instances.isTerminated(v.id) && cloud.powerOf(v.id) === "stopped" && ctx.stack.spares.some((n) => n.az === v.az && healthy(ctx, s, n));
    if (!(await until(ctx, REPLACEMENT_MS + 90_000, replaced))) r.notes.push(`${v.id} not replaced (spare serving, host terminated) within ${(REPLACEMENT_MS + 90_000) / 1000} s`);
    r.healAt = mark(ctx, "heal", `${v.id} replaced`);
    await sleep(300);
    r.endAt = ctx.now();
    finish(ctx, r, [v], l1Removed);
    const acts = stepsOf(cloud, v.id, r.injectAt, r.endAt);
    const figures = replacementFigures(ctx, cloud, r, v, r.injectAt);
    r.extra.stepsOutOfOrder = outOfOrder(acts, ["cordon", "drain", "surge", "terminate"]);
    r.extra.steps = stepsText(acts);
    r.extra.figures = `${v.id} (${host}): ${r.extra.steps}; ${figures}; failed requests ${r.failed}`;
  } finally {
    await watch.stop();
    await cloud.instances.reset();
    await backToSteady(ctx, r);
  }
  return r;
}

export async function runRepairCapacityShort(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const p = await prepare(ctx, spec, run);
  if (!p.cloud) return p.r;
  const { r, cloud, watch } = p;
  const v = pickVictim(ctx, cloud);
  const standby = ctx.stack.nodes.filter((n) => ctx.stack.azOf(n).standby);
  const failuresBefore = cloud.instances.launches.length;
  cloud.instances.capacityFault(v.az, 1000);
  try {
    r.injectAt = mark(ctx, "inject", `${spec.name} ${v.id}: row-remap failure, ${v.az} out of capacity`);
    await v.gpuFault("rowRemapFailure");
    const held = (): boolean => {
      const e = watch.latest()?.plan.get(v.id);
      return e?.action === "held" && e.bound === "failed";
    };
    if (!(await until(ctx, REPLACEMENT_MS + 90_000, () => held()))) r.notes.push(`${v.id} not shown held within ${(REPLACEMENT_MS + 90_000) / 1000} s`);
    await until(ctx, 20_000, (s) => standby.some((n) => serving(s, n)));
    // The leader's gauge follows the plan within a period.
    let gauge: number | null = null;
    for (let i = 0; i < 20 && !(gauge && gauge > 0); i++) {
      gauge = await watch.heldGauge();
      if (!(gauge && gauge > 0)) await sleep(250);
    }
    r.healAt = mark(ctx, "heal", `an operator repairs ${v.id}`);
    r.endAt = ctx.now();
    finish(ctx, r, [v], l1Removed);
    const acts = stepsOf(cloud, v.id, r.injectAt, r.endAt);
    const entry = watch.latest()?.plan.get(v.id);
    const failures = cloud.instances.launches.slice(failuresBefore).filter((l) => l.message);
    const heldAt = watch.samples.find((s) => s.t >= r.injectAt && s.plan.get(v.id)?.action === "held" && s.plan.get(v.id)?.bound === "failed")?.t ?? null;
    const standbyMs = firstAfter(ctx.tl.samples, r.injectAt, (s) => standby.some((n) => serving(s, n)), r.endAt);
    r.extra.terminated = acts.some((a) => a.step === "terminate") || cloud.instances.isTerminated(v.id) ? 1 : 0;
    r.extra.notHeld = entry?.action === "held" && entry.bound === "failed" && /no replacement HEALTHY/.test(entry.reason) ? 0 : 1;
    r.extra.notDrained = cloud.instances.isCordoned(v.id) && !v.serving ? 0 : 1;
    r.extra.heldGauge = gauge;
    r.extra.heldGaugeZero = gauge && gauge > 0 ? 0 : 1;
    // The standby covers when the AZ falls below its floor: one node held in a large AZ (a drill
    // stack grown for `repair-storm`) leaves it OK, and nothing needs covering.
    const azBelowFloor = ctx.tl.fleet.some((f) => f.t >= r.injectAt && f.t <= r.endAt && (f.azState[v.az] === "DEGRADED" || f.azState[v.az] === "DOWN"));
    r.extra.azBelowFloor = azBelowFloor ? 1 : 0;
    r.extra.standbyNeverServed = azBelowFloor && standbyMs === null ? 1 : 0;
    r.extra.heldMs = heldAt === null ? null : heldAt - r.injectAt;
    r.extra.standbyServingMs = standbyMs;
    r.extra.failedLaunches = failures.length;
    r.extra.heldReason = entry?.reason ?? null;
    r.extra.steps = stepsText(acts);
    r.extra.figures =
      `${v.id}: ${r.extra.steps}; ${failures.length} failed launches (${failures[0]?.message?.slice(0, 70) ?? "none"}…); held ${fmt(r.extra.heldMs)} after the fault ` +
      `(${entry?.action ?? "-"}, bound ${entry?.bound ?? "-"}: ${(entry?.reason ?? "").slice(0, 260)}); llmha_repair_held ${gauge ?? "-"}; ${azBelowFloor ? `${v.az} below its floor, standby serving ${fmt(standbyMs)}` : `${v.az} stayed OK (no standby needed)`}; ` +
      `terminated ${r.extra.terminated ? "YES" : "no"}, cordoned and drained ${r.extra.notDrained ? "NO" : "yes"}; failed requests ${r.failed}`;
  } finally {
    await watch.operatorRepair(cloud, v, false);
    await watch.stop();
    cloud.instances.capacityFault(v.az, 0);
    await cloud.instances.reset();
    await backToSteady(ctx, r);
  }
  return r;
}

export async function runBadHostReturns(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const p = await prepare(ctx, spec, run);
  if (!p.cloud) return p.r;
  const { r, cloud, watch } = p;
  const v = pickVictim(ctx, cloud);
  const host = cloud.instances.instanceOf(v.id);
  try {
    r.injectAt = mark(ctx, "inject", `${spec.name} ${v.id}: XID 79, GPU ${FAULTED_GPU} off the bus`);
    await offBus(v);
    if (!(await until(ctx, DRILL_BOOT_MS + 120_000, (s) => rebootedBack(ctx, cloud, v, r.injectAt, s)))) r.notes.push(`${v.id} not rebooted and back within ${(DRILL_BOOT_MS + 120_000) / 1000} s`);
    await sleep(500);
    const again = mark(ctx, "inject", `${v.id} fails again: XID 48 (double-bit ECC) within the window`);
    await v.xid(48);
    const replaced = (s: Sample): boolean => cloud.instances.isTerminated(v.id) && cloud.powerOf(v.id) === "stopped" && ctx.stack.spares.some((n) => n.az === v.az && healthy(ctx, s, n));
    if (!(await until(ctx, REPLACEMENT_MS + 90_000, replaced))) r.notes.push(`${v.id} not quarantined and replaced within ${(REPLACEMENT_MS + 90_000) / 1000} s`);
    r.healAt = mark(ctx, "heal", `${v.id} replaced`);
    await sleep(300);
    r.endAt = ctx.now();
    finish(ctx, r, [v], l1Removed);
    const first = stepsOf(cloud, v.id, r.injectAt, again);
    const second = stepsOf(cloud, v.id, again, r.endAt);
    const figures = replacementFigures(ctx, cloud, r, v, again);
    const quarantinedAt = watch.samples.find((s) => s.t >= again && s.quarantined.includes(host))?.t ?? null;
    r.extra.notQuarantined = quarantinedAt === null ? 1 : 0;
    r.extra.quarantineMs = quarantinedAt === null ? null : quarantinedAt - again;
    r.extra.backInRotation = ctx.tl.samples.filter((s) => s.t > again + 1000 && s.t <= r.endAt && (s.nodes[v.id]?.status === "HEALTHY" || (s.l1[rowOf(ctx, v)]?.status ?? "") === "UP")).length;
    r.extra.stepsOutOfOrder = outOfOrder(first, ["cordon", "drain", "reboot", "uncordon"]) || outOfOrder(second, ["cordon", "drain", "surge", "terminate"]);
    r.extra.steps = `${stepsText(first)} | ${stepsText(second)}`;
    r.extra.figures =
      `${v.id} (${host}): first ${stepsText(first)}, HEALTHY ${fmt(healthyAfterReboot(ctx, cloud, v, r.injectAt, again))}; ` +
      `again ${fmt(again - r.injectAt)} after: quarantined ${fmt(r.extra.quarantineMs)} later, ${stepsText(second)}; ${figures} (from the first fault); ` +
      `back in rotation in ${r.extra.backInRotation} samples after the second fault; failed requests ${r.failed}`;
  } finally {
    await watch.stop();
    await cloud.instances.reset();
    await backToSteady(ctx, r);
  }
  return r;
}

export async function runRepairStorm(ctx: ScenarioContext, spec: ScenarioSpec, run: number): Promise<RunResult> {
  const p = await prepare(ctx, spec, run);
  if (!p.cloud) return p.r;
  const { r, cloud, watch } = p;
  const az = ctx.stack.azs[0];
  const inAz = ctx.stack.nodes.filter((n) => n.az === az.name && n.running);
  if (inAz.length < 6) {
    await watch.stop();
    r.notMeasured = `${az.name} has ${inAz.length} nodes; the storm needs 6 (5 faulted, 1 serving)`;
    return r;
  }
  const victims = inAz.slice(0, 5);
  const floor = Math.ceil(0.75 * inAz.length);
  const bound = 5 * (DRILL_BOOT_MS + 50_000);
  try {
    r.injectAt = mark(ctx, "inject", `${spec.name}: XID 79 on ${victims.map((n) => n.id).join(",")}`);
    await Promise.all(victims.map(offBus));
    if (!(await until(ctx, bound, (s) => victims.every((n) => rebootedBack(ctx, cloud, n, r.injectAt, s)) && watch.latest()?.active.size === 0))) {
      r.notes.push(`not every node repaired within ${bound / 1000} s`);
    }
    r.healAt = mark(ctx, "heal", `${az.name} repaired`);
    await sleep(300);
    r.endAt = ctx.now();
    finish(ctx, r, victims, l1Removed);
    // A cordon of a node serving at that moment while its AZ's HEALTHY nodes without it fell below the floor.
    const cordons = cloud.instances.actions.filter((a) => a.step === "cordon" && a.outcome === "applied" && a.t >= r.injectAt && a.t <= r.endAt);
    r.extra.floorBreaches = cordons.filter((a) => {
      const s = [...ctx.tl.samples].reverse().find((x) => x.t <= a.t);
      const up = inAz.filter((n) => s?.nodes[n.id]?.status === "HEALTHY");
      return s !== undefined && up.some((n) => n.id === a.node) && up.length - 1 < floor;
    }).length;
    r.extra.maxInRepairPerAz = maxInRepair(cloud, inAz.map((n) => n.id), r.injectAt, r.endAt);
    r.extra.maxActive = Math.max(0, ...watch.samples.filter((s) => s.t >= r.injectAt).map((s) => s.active.size));
    const back = victims.map((n) => ({ n, ms: healthyAfterReboot(ctx, cloud, n, r.injectAt, r.endAt) }));
    r.extra.notRepaired = victims.filter((n) => !effectiveSteps(stepsOf(cloud, n.id, r.injectAt, r.endAt)).includes("uncordon")).length;
    r.extra.allBackMs = back.some((b) => b.ms === null) ? null : Math.max(...back.map((b) => b.ms!));
    const order = [...back].sort((a, b) => (a.ms ?? Infinity) - (b.ms ?? Infinity)).map((b) => `${b.n.id}@${fmt(b.ms)}`);
    r.extra.steps = victims.map((n) => `${n.id}: ${stepsText(stepsOf(cloud, n.id, r.injectAt, r.endAt))}`).join(" | ");
    r.extra.figures =
      `HEALTHY in turn ${order.join(", ")}; at most ${r.extra.maxInRepairPerAz} node(s) of ${az.name} in repair at once (${r.extra.maxActive} fleet-wide); ` +
      `serving nodes taken below the floor (${floor} of ${inAz.length}): ${r.extra.floorBreaches}; failed requests ${r.failed}`;
  } finally {
    for (const n of victims) if (cloud.instances.isCordoned(n.id) || !n.running) await watch.operatorRepair(cloud, n, true);
    await watch.stop();
    await backToSteady(ctx, r);
  }
  return r;
}

export const REPAIR_RUNS: readonly [string, (ctx: ScenarioContext, spec: ScenarioSpec, run: number) => Promise<RunResult>][] = [
  ["repair-reboot", runRepairReboot],
  ["repair-replace", runRepairReplace],
  ["repair-capacity-short", runRepairCapacityShort],
  ["bad-host-returns", runBadHostReturns],
  ["repair-storm", runRepairStorm],
];
