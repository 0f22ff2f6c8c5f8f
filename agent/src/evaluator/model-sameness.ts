/**
 * Same model everywhere (seed 004 §5.2): a failover to a node serving another model, revision
 * or precision changes the answers users get. Given what each node says it serves, the fleet's
 * majority is the reference; a node that differs is an outlier, and an AZ whose every serving
 * node differs is an outlier AZ. Nodes that serve nothing yet (loading) have no say.
 */
export interface ServedBy {
  nodeId: string;
  az: string;
  /** What the node serves, as one comparable string (`id`, or `id@revision`); empty: nothing yet. */
  model: string;
}

export interface ModelSameness {
  /** The fleet's majority model, null when no node serves one. */
  majority: string | null;
  /** Nodes serving something else, with what. */
  outliers: { nodeId: string; az: string; model: string }[];
  /** AZs in which no serving node matches the majority. */
  outlierAzs: string[];
}

/** Ties go to the model served in more AZs, then to the name (stable across leaders). */
export function modelSameness(nodes: readonly ServedBy[]): ModelSameness {
  const serving = nodes.filter((n) => n.model !== "");
  const count = new Map<string, { nodes: number; azs: Set<string> }>();
  for (const n of serving) {
    const c = count.get(n.model) ?? { nodes: 0, azs: new Set<string>() };
    c.nodes += 1;
    c.azs.add(n.az);
    count.set(n.model, c);
  }
  const ranked = [...count.entries()].sort((a, b) => b[1].nodes - a[1].nodes || b[1].azs.size - a[1].azs.size || a[0].localeCompare(b[0]));
  const majority = ranked[0]?.[0] ?? null;
  const outliers = serving.filter((n) => n.model !== majority).map((n) => ({ nodeId: n.nodeId, az: n.az, model: n.model }));
  const azs = [...new Set(serving.map((n) => n.az))].sort();
  const outlierAzs = azs.filter((az) => !serving.some((n) => n.az === az && n.model === majority));
  return { majority, outliers: outliers.sort((a, b) => a.nodeId.localeCompare(b.nodeId)), outlierAzs };
}
