/**
 * Same model everywhere (seed 004 §5.2): a failover to a node serving another model, revision
 * or precision changes the answers users get. Given what each node says it serves, the fleet's
 * majority is the reference; a node that differs is an outlier, and an AZ whose every serving
 * node differs is an outlier AZ. Nodes that serve nothing yet (loading) have no say.
 *
 * What is compared: the model id, then the revision (weights hash, commit), the precision
 * (dtype) and the context length, each only where both sides know it — servers of one kind
 * report the same fields, and a server that does not tell a revision cannot be judged on it.
 * The majority is chosen field by field: the id served by most nodes, then among the nodes
 * serving that id the revision most of those that report one report, then the dtype, then the
 * context length. Ties go to the value seen in more AZs, then to the name (stable across leaders).
 */
export interface ServedBy {
  nodeId: string;
  az: string;
  /** The model id served; empty: nothing yet (the node has no say). */
  model: string;
  /** Revision, commit or weights hash, where the server tells; null/absent: unknown. */
  revision?: string | null;
  /** Precision (`float16`, `bfloat16`, `fp8`...), where the server tells. */
  dtype?: string | null;
  /** Longest context (tokens), where the server tells. */
  maxContext?: number | null;
}

/** What differs between a node and the majority. */
export type ModelField = "id" | "revision" | "dtype" | "maxContext";

export interface ModelIdentityKey {
  id: string;
  revision: string | null;
  dtype: string | null;
  maxContext: number | null;
}

export interface ModelSameness {
  /** The fleet's majority as one string (`modelKey`), null when no node serves one. */
  majority: string | null;
  /** The majority field by field; null when no node serves one. */
  majorityIdentity: ModelIdentityKey | null;
  /** Serving nodes that agree with the majority. */
  agreeing: number;
  /** Nodes serving something else, with what (`modelKey`) and which fields differ. */
  outliers: { nodeId: string; az: string; model: string; differs: ModelField[] }[];
  /** AZs in which no serving node matches the majority. */
  outlierAzs: string[];
}

/** `torch.float16` (TGI) and `float16` (vLLM's `--dtype`) are one precision. */
export function normalizeDtype(d: string | null | undefined): string | null {
  if (!d) return null;
  const s = d.trim().toLowerCase().replace(/^torch\./, "");
  return s === "" || s === "auto" ? null : s;
}

function identityOf(n: ServedBy): ModelIdentityKey {
  return {
    id: n.model,
    revision: n.revision ? n.revision : null,
    dtype: normalizeDtype(n.dtype),
    maxContext: typeof n.maxContext === "number" && Number.isFinite(n.maxContext) && n.maxContext > 0 ? n.maxContext : null,
  };
}

/** One comparable, readable string: `id@revision dtype:float16 ctx:8192` (unknown parts left out). */
export function modelKey(m: ModelIdentityKey): string {
  let s = m.id;
  if (m.revision) s += `@${m.revision}`;
  if (m.dtype) s += ` dtype:${m.dtype}`;
  if (m.maxContext !== null) s += ` ctx:${m.maxContext}`;
  return s;
}

/** The value most nodes have (nulls have no say); ties: more AZs, then the smaller name. */
function most<T extends string | number>(nodes: readonly { az: string; v: T | null }[]): T | null {
  const count = new Map<T, { nodes: number; azs: Set<string> }>();
  for (const n of nodes) {
    if (n.v === null) continue;
    const c = count.get(n.v) ?? { nodes: 0, azs: new Set<string>() };
    c.nodes += 1;
    c.azs.add(n.az);
    count.set(n.v, c);
  }
  const ranked = [...count.entries()].sort((a, b) => b[1].nodes - a[1].nodes || b[1].azs.size - a[1].azs.size || String(a[0]).localeCompare(String(b[0])));
  return ranked[0]?.[0] ?? null;
}

/** The fields in which `m` differs from `ref`; a field unknown on either side is not compared. */
export function modelDiffers(m: ModelIdentityKey, ref: ModelIdentityKey): ModelField[] {
  if (m.id !== ref.id) return ["id"];
  const out: ModelField[] = [];
  if (m.revision !== null && ref.revision !== null && m.revision !== ref.revision) out.push("revision");
  if (m.dtype !== null && ref.dtype !== null && m.dtype !== ref.dtype) out.push("dtype");
  if (m.maxContext !== null && ref.maxContext !== null && m.maxContext !== ref.maxContext) out.push("maxContext");
  return out;
}

export function modelSameness(nodes: readonly ServedBy[]): ModelSameness {
  const serving = nodes.filter((n) => n.model !== "").map((n) => ({ nodeId: n.nodeId, az: n.az, m: identityOf(n) }));
  const id = most(serving.map((n) => ({ az: n.az, v: n.m.id })));
  if (id === null) return { majority: null, majorityIdentity: null, agreeing: 0, outliers: [], outlierAzs: [] };
  let same = serving.filter((n) => n.m.id === id);
  const revision = most(same.map((n) => ({ az: n.az, v: n.m.revision })));
  same = same.filter((n) => revision === null || n.m.revision === null || n.m.revision === revision);
  const dtype = most(same.map((n) => ({ az: n.az, v: n.m.dtype })));
  same = same.filter((n) => dtype === null || n.m.dtype === null || n.m.dtype === dtype);
  const maxContext = most(same.map((n) => ({ az: n.az, v: n.m.maxContext })));
  const ref: ModelIdentityKey = { id, revision, dtype, maxContext };
  const judged = serving.map((n) => ({ ...n, differs: modelDiffers(n.m, ref) }));
  const outliers = judged
    .filter((n) => n.differs.length > 0)
    .map((n) => ({ nodeId: n.nodeId, az: n.az, model: modelKey(n.m), differs: n.differs }))
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  const azs = [...new Set(serving.map((n) => n.az))].sort();
  const outlierAzs = azs.filter((az) => !judged.some((n) => n.az === az && n.differs.length === 0));
  return { majority: modelKey(ref), majorityIdentity: ref, agreeing: judged.length - outliers.length, outliers, outlierAzs };
}
