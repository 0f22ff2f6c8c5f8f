import { INSTANCE_TYPE, isObj, type Obj, type Settings } from "./read";

/**
 * GPU classes llm-ha knows, with the instance type and GPU count of each, and the next
 * instance types of the class that the standby AZ's fallback group launches when the first
 * type has no capacity (`llm-ha:standbyFallback`): p4de (A100 80 GB) after p4d, p5e (H200,
 * 8 GPUs, more memory: what fits an H100 fits it) after p5. Each has 8 GPUs, as the class.
 */
export const GPU_CLASSES = Object.freeze({
  a100: { instanceType: "p4d.24xlarge", gpus: 8, fallbackInstanceTypes: ["p4de.24xlarge"] as readonly string[] },
  h100: { instanceType: "p5.48xlarge", gpus: 8, fallbackInstanceTypes: ["p5e.48xlarge"] as readonly string[] },
});
export type GpuClassName = keyof typeof GPU_CLASSES;

/** One GPU class deployed in every AZ. */
export interface GpuClassConfig {
  name: GpuClassName;
  /** The first of `instanceTypes` (prices, quotas). */
  instanceType: string;
  /**
   * EC2 instance types, in order of preference: the node group launches whichever has
   * capacity (`instanceTypes: [p5.48xlarge, p5e.48xlarge]`). Default the class's one type.
   * Exactly one with a capacity reservation or block (a reservation is for one type).
   */
  instanceTypes: string[];
  /** GPUs per node; defaults to the class's (8). */
  gpusPerNode: number;
  /** Nodes per AZ while active. */
  desiredPerAz: number;
  /** Upper bound per AZ (also the HAProxy server slots for the AZ). */
  maxPerAz: number;
  /**
   * Capacity reservation per AZ (`{us-east-1a: cr-…}`): a reservation belongs to one AZ, so
   * each AZ's node group launches into its own; an AZ without one launches On-Demand.
   */
  capacityReservations: Record<string, string>;
  /** `ON_DEMAND` (default) or `CAPACITY_BLOCK` (EC2 Capacity Blocks for ML: a reservation in every AZ). */
  capacityType: "ON_DEMAND" | "CAPACITY_BLOCK";
}

/** `instanceTypes` (a list), or the older single `instanceType`, or the class's type. */
function instanceTypesOf(s: Settings, g: Obj, path: string, dflt: string): string[] {
  const v = g.instanceTypes ?? (g.instanceType !== undefined ? [g.instanceType] : [dflt]);
  if (!Array.isArray(v) || v.length === 0 || !v.every((t) => typeof t === "string" && INSTANCE_TYPE.test(t))) {
    s.p.add(`${path}.instanceTypes`, "must be a non-empty list of EC2 instance types, e.g. [p5.48xlarge, p5e.48xlarge]");
    return [];
  }
  if (new Set(v).size !== v.length) s.p.add(`${path}.instanceTypes`, "lists an instance type twice");
  return v as string[];
}

/** `llm-ha:capacityReservations` of one class: one reservation id per AZ, each AZ's own. */
function reservationsOf(s: Settings, crs: unknown, path: string, azs: string[]): Record<string, string> {
  const reservations: Record<string, string> = {};
  if (!isObj(crs)) {
    s.p.add(`${path}.capacityReservations`, "must map an availability zone to a reservation id (cr-…)");
    return reservations;
  }
  for (const [az, id] of Object.entries(crs)) {
    if (!azs.includes(az)) s.p.add(`${path}.capacityReservations.${az}`, `${az} is not one of llm-ha:azs`);
    else if (typeof id !== "string" || !/^cr-[0-9a-f]{8,17}$/.test(id)) s.p.add(`${path}.capacityReservations.${az}`, "must look like cr-0123456789abcdef0");
    else reservations[az] = id;
  }
  const ids = Object.values(reservations);
  const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
  if (twice.length) s.p.add(`${path}.capacityReservations`, `${twice[0]} is listed for two AZs; a reservation belongs to one AZ`);
  return reservations;
}

/** `llm-ha:gpuClasses`: the GPU classes deployed in every AZ, with their capacity. */
export function gpuClassesOf(s: Settings, azs: string[]): GpuClassConfig[] {
  const { p, key } = s;
  const gpuRaw = s.cfg.getObject<unknown>("gpuClasses");
  const gpuClasses: GpuClassConfig[] = [];
  if (!Array.isArray(gpuRaw) || gpuRaw.length === 0) {
    p.add(key("gpuClasses"), "must be a non-empty list");
    return gpuClasses;
  }
  gpuRaw.forEach((g: unknown, i) => {
    const path = key(`gpuClasses[${i}]`);
    if (!isObj(g)) return p.add(path, "must be an object");
    const name = g.name;
    if (typeof name !== "string" || !(name in GPU_CLASSES)) {
      return p.add(`${path}.name`, `unknown GPU class ${JSON.stringify(name)}; known: ${Object.keys(GPU_CLASSES).join(", ")}`);
    }
    if (gpuClasses.some((c) => c.name === name)) return p.add(`${path}.name`, `GPU class ${name} listed twice`);
    const known = GPU_CLASSES[name as GpuClassName];
    const desiredPerAz = s.int(g, "desiredPerAz", `${path}.desiredPerAz`, 1, 0);
    const maxPerAz = s.int(g, "maxPerAz", `${path}.maxPerAz`, Math.max(desiredPerAz, 1));
    if (maxPerAz < desiredPerAz) p.add(`${path}.maxPerAz`, "must be ≥ desiredPerAz");
    if (g.capacityReservationId !== undefined) {
      p.add(`${path}.capacityReservationId`, "a capacity reservation belongs to one AZ: set capacityReservations: {<az>: cr-…} instead");
    }
    if (g.efa !== undefined) {
      p.add(
        `${path}.efa`,
        "is not supported: tensor parallelism within one node runs over NVLink and needs no EFA; a half-configured EFA " +
          "(no self-referencing security group, placement group or EFA device plugin) only breaks node launch. Remove the key",
      );
    }
    const types = instanceTypesOf(s, g, path, known.instanceType);
    const capacityType = g.capacityType ?? "ON_DEMAND";
    if (capacityType !== "ON_DEMAND" && capacityType !== "CAPACITY_BLOCK") p.add(`${path}.capacityType`, 'must be "ON_DEMAND" or "CAPACITY_BLOCK"');
    const reservations = reservationsOf(s, g.capacityReservations ?? {}, path, azs);
    if ((Object.keys(reservations).length > 0 || capacityType === "CAPACITY_BLOCK") && types.length > 1) {
      p.add(`${path}.instanceTypes`, "a capacity reservation or block is for one instance type: list exactly one");
    }
    if (capacityType === "CAPACITY_BLOCK") {
      const without = azs.filter((az) => reservations[az] === undefined);
      if (without.length) p.add(`${path}.capacityReservations`, `CAPACITY_BLOCK needs a capacity block reservation in every AZ; missing: ${without.join(", ")}`);
    }
    gpuClasses.push({
      name: name as GpuClassName,
      instanceType: types[0] ?? known.instanceType,
      instanceTypes: types.length ? types : [known.instanceType],
      gpusPerNode: s.int(g, "gpusPerNode", `${path}.gpusPerNode`, known.gpus),
      desiredPerAz,
      maxPerAz,
      capacityReservations: reservations,
      capacityType: capacityType === "CAPACITY_BLOCK" ? "CAPACITY_BLOCK" : "ON_DEMAND",
    });
  });
  return gpuClasses;
}

/**
 * `llm-ha:gpuFastImagePull` (default true): the GPU nodes pull images with nodeadm's
 * `FastImagePull` gate (SOCI parallel pull) onto a gp3 root volume at 1,000 MiB/s and 16,000
 * IOPS (infra/gpu-node-groups.ts, docs/infra.md "Wake path"). `false`: the launch templates as
 * before, no gate and a baseline gp3 root (125 MiB/s, 3,000 IOPS).
 */
export function gpuFastImagePullOf(s: Settings): boolean {
  const raw = s.cfg.get("gpuFastImagePull");
  if (raw !== undefined && raw !== "true" && raw !== "false") {
    s.p.add(s.key("gpuFastImagePull"), `must be true or false, got ${JSON.stringify(raw)}`);
    return true;
  }
  return raw !== "false";
}
