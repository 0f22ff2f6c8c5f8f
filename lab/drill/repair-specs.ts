/**
 * The repair ladder's rows of the fault matrix (injectors in scenarios/repair.ts): the leader
 * acts on its repair plan (`DRILL_REPAIR_ENV`: `LLMHA_REPAIR_MODE=act`) through the local
 * cloud's simulated instances, which reboot in `DRILL_BOOT_MS` and surge onto spare slots.
 */
import type { ScenarioSpec } from "./scenarios";
import { DRILL_BOOT_MS, DRILL_REPAIR_ENV } from "./settings";

const REPAIR = { tier: "fleet", quick: false, repeat: { full: 1, quick: 1 }, needsFleet: true, agentEnv: DRILL_REPAIR_ENV } as const;

export const REPAIR_SCENARIOS: readonly ScenarioSpec[] = [
  {
    ...REPAIR,
    name: "repair-reboot",
    title: `XID 79 on one node (a GPU off the bus): cordoned, drained, rebooted (boot ${DRILL_BOOT_MS / 1000} s), HEALTHY and back in rotation, uncordoned`,
    targets: { failed: 0, extraTimes: { healthyMs: DRILL_BOOT_MS + 60_000 }, extraCounts: { stepsOutOfOrder: 0, notRepaired: 0 } },
  },
  {
    ...REPAIR,
    name: "repair-replace",
    title: "row-remap failure on one node (a reboot does not heal it): a spare instance launched and serving before the old host is terminated",
    needsSpares: 1,
    targets: { failed: 0, extraCounts: { stepsOutOfOrder: 0, notReplaced: 0, terminatedBeforeReplacement: 0 } },
  },
  {
    ...REPAIR,
    name: "repair-capacity-short",
    title: "row-remap failure with the AZ out of capacity (every launch fails with AWS's message): the node stays drained, never terminated, held with the reason; the standby covers",
    needsSpares: 1,
    targets: { failed: 0, extraCounts: { terminated: 0, notHeld: 0, notDrained: 0, heldGaugeZero: 0, standbyNeverServed: 0 } },
  },
  {
    ...REPAIR,
    name: "bad-host-returns",
    title: "a host repaired by a reboot fails again within the window (XID 48): quarantined, never back in rotation, replaced",
    needsSpares: 1,
    targets: { failed: 0, extraCounts: { stepsOutOfOrder: 0, notQuarantined: 0, backInRotation: 0, notReplaced: 0, terminatedBeforeReplacement: 0 } },
  },
  {
    ...REPAIR,
    name: "repair-storm",
    title: "XID 79 on 5 nodes of one AZ at once: repaired one at a time (one per AZ, the fleet share), the AZ never below its floor because of a repair",
    needsFirstAzNodes: 6,
    targets: { failed: 0, extraCounts: { maxInRepairPerAz: 1, floorBreaches: 0, notRepaired: 0 } },
  },
];
