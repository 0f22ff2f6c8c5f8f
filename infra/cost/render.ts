import type { CostReport, Totals } from "./estimate";
import { renderTable, wrapText, type Column } from "../../contracts/table";
import { renderWake } from "./wake";

const num = (x: number): string => x.toLocaleString("en-US", { maximumFractionDigits: 2 });
const usd = (x: number): string => `$${x.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
const pct = (x: number): string => `${x.toFixed(1)} %`;

/** The report as the table `llm-ha cost` prints. */
/**
 * The report as the table `llm-ha cost` prints: fitted to `width` (the instance type and the
 * GPU-hour columns only with `wide`), the prose wrapped to it.
 */
export function renderCost(r: CostReport, o: { width?: number; wide?: boolean } = {}): string {
  const columns: Column[] = [
    { head: "AZ" },
    { head: "role" },
    { head: "class" },
    { head: "instance", wide: true },
    { head: "nodes", right: true },
    { head: "GPUs", right: true },
    { head: "GPU-h always-on", right: true, wide: true },
    { head: "GPU-h scheduled", right: true, wide: true },
    { head: "$/mo always-on", right: true },
    { head: "$/mo scheduled", right: true },
    { head: "saved", right: true },
  ];
  const totalRow = (label: string, t: Totals): string[] => [
    label,
    "",
    "",
    "",
    String(t.nodes),
    String(t.gpus),
    num(t.gpuHoursAlwaysOn),
    num(t.gpuHoursScheduled),
    usd(t.usdAlwaysOn),
    usd(t.usdScheduled),
    pct(t.savedPct),
  ];
  const rows = [
    ...r.groups.map((g) => [
      g.az,
      g.role,
      g.gpuClass,
      g.instanceType,
      String(g.nodes),
      String(g.gpus),
      num(g.gpuHoursAlwaysOn),
      num(g.gpuHoursScheduled),
      usd(g.usdAlwaysOn),
      usd(g.usdScheduled),
      pct(g.savedPct),
    ]),
  ];
  // Practice wakes: the standby groups woken from zero, per class, for up to the budget each run.
  for (const x of r.practice?.rows ?? []) {
    rows.push([x.az, "practice", x.gpuClass, x.instanceType, String(x.nodes), String(x.gpus), "0", num(x.gpuHours), usd(0), usd(x.usd), ""]);
  }
  if (r.standby) rows.push(totalRow("standby AZ", r.standby));
  rows.push(totalRow("total", r.total));

  const out = [`llm-ha cost: stack ${r.stack} (${r.file}), ${r.region}, ${r.month}: ${r.hours} h (UTC month), On-Demand prices`, "", ...renderTable(columns, rows, o), ""];
  const s = r.schedule;
  if (s) {
    const crons = [`down "${s.scaleDown}"`, ...(s.weekendDown ? [`weekend down "${s.weekendDown}"`] : []), `up "${s.scaleUp}"`].join(", ");
    out.push(
      `Standby schedule on ${r.standbyAz} (${s.timeZone}): ${crons}.`,
      `  Up ${num(s.hoursUp)} h, at zero ${num(s.hoursDown)} h of ${r.hours} h (${pct((100 * s.hoursDown) / r.hours)} of the month); ` +
        `${s.scaleDowns} scale-down(s), ${s.scaleUps} scale-up(s); the month starts ${s.startsUp ? "up" : "at zero"}.`,
      `  It acts on the standby AZ only: saves ${usd(r.total.usdSaved)} a month, ${pct(r.standby?.savedPct ?? 0)} of that AZ's GPU cost, ` +
        `${pct(r.total.savedPct)} of the environment's.`,
    );
  } else {
    out.push("No standby schedule in this stack: every group runs all month, nothing is saved.");
  }
  const pr = r.practice;
  if (pr) {
    out.push(
      `Practice wakes "${pr.cron}" (${pr.timeZone}): ${pr.firings} this month, ${pr.runs} with the standby at zero (each counted at its budget, ` +
        `${pr.budgetMinutes} min, at the wake size), ${pr.skipped} skipped (standby up): ${num(pr.gpuHours)} GPU-h, ${usd(pr.usd)}, in the rows above and the totals.`,
    );
  }
  const rd = r.redundancy;
  if (rd && rd.ratio < 1) {
    out.push(
      `Partial redundancy: the standby AZ runs at ${Math.round(rd.ratio * 100)} % of an active AZ (${rd.nodes} nodes instead of ${rd.fullNodes}): ` +
        `${usd(rd.usdPartial)} instead of ${usd(rd.usdFull)} a month, saves ${usd(rd.usdSaved)} against full redundancy (${pct(rd.savedPct)} of the environment's). ` +
        "A woken standby then carries at most that share of a lost AZ.",
    );
  } else if (rd) {
    out.push("Full redundancy: the standby AZ is sized as an active AZ (llm-ha:standbyCapacityRatio 1).");
  }
  out.push("", ...renderWake(r.wake));
  out.push("", "Prices (USD per instance-hour):");
  for (const p of r.prices) {
    out.push(`  ${p.instanceType} ${p.region}: ${p.usdPerHour} as of ${p.asOf}, ${p.source}${p.confirmed ? "" : " (not confirmed on AWS's pricing page)"}`);
  }
  out.push(
    "",
    "Not counted: the controller waking the standby AZ early, its fallback groups (at zero until a wake cannot launch),",
    "scaling above the desired size, boot and drain time, EBS volumes, system nodes, EKS, Redis, MSK, NAT, load balancers",
    "and data transfer.",
  );
  const width = o.wide ? Infinity : (o.width ?? Infinity);
  return out.flatMap((line) => wrapText(line, width, /^ */.exec(line)![0] + "  ")).join("\n") + "\n";
}
