/**
 * What `global-outage` checks of L4 as a client relies on it, with the `openai` SDK
 * class: an idempotency key repeated runs once, a 503 the SDK retries (the broker frozen past the
 * acknowledgement timeout) runs once, a poisoning attempt by one tenant is never served to
 * another, and — with a second fallback in the replay group killed with SIGKILL as the tier
 * drops — the replay of its partitions resumes within 5 s. Runs are counted at the inference
 * servers (the fakes count the `l4#<tag>` a prompt opens with).
 */
import OpenAI from "openai";
import { TENANT_HEADER } from "../../../contracts/edge";
import { kafkaClient, RequestQueue } from "../../../agent/src/edge/fallback/queue";
import { groupFor, topicFor } from "../../../agent/src/edge/fallback/queue";
import type { Logger } from "../../../agent/src/util/log";
import { sleep } from "../../../agent/src/util/net";
import type { KafkaMockHandle } from "../../engines/kafka-mock";
import type { FallbackProcess } from "../../fallback-process";
import type { SimNode } from "../../sim/sim-node";
import { drillAuth } from "../credentials";
import { DRILL_MODEL } from "../stack";

/**
 * The headers that make a request a tenant's — the one place to switch to API keys. The L4
 * proxy of this scenario renders no edge: it passes a client's `x-llmha-tenant` through, so
 * the drill names the tenant itself (plus the ops key the AZ proxies' edge wants). Once this
 * proxy authenticates, return the tenant's own key here and let the proxy set the tenant.
 */
export function asTenant(tenant: string): Record<string, string> {
  return { ...drillAuth("ops"), [TENANT_HEADER]: tenant };
}

/** The drill's SDK client for a tenant, through `baseUrl` (the L4 proxy), with the SDK's default retries. */
export function sdkFor(baseUrl: string, tenant: string): OpenAI {
  return new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "llm-ha-drill", defaultHeaders: asTenant(tenant) });
}

/** Completions per tag over every node's inference server. */
export async function taggedRuns(nodes: readonly SimNode[]): Promise<{ runs: Map<string, number>; via: Map<string, string[]> }> {
  const runs = new Map<string, number>();
  const via = new Map<string, string[]>();
  for (const t of await Promise.all(nodes.map((n) => n.stats()))) {
    for (const [k, v] of Object.entries(t?.tagged ?? {})) runs.set(k, (runs.get(k) ?? 0) + v);
    for (const [k, v] of Object.entries(t?.taggedVia ?? {})) via.set(k, [...(via.get(k) ?? []), ...v]);
  }
  return { runs, via };
}

const ask = (content: string, extra: Record<string, unknown> = {}): OpenAI.ChatCompletionCreateParamsNonStreaming =>
  ({ model: DRILL_MODEL, messages: [{ role: "user", content }], max_tokens: 8, ...extra }) as OpenAI.ChatCompletionCreateParamsNonStreaming;

/** A queued request through the SDK: its status and id (202), or the status the SDK gave up with. */
async function queueVia(client: OpenAI, body: OpenAI.ChatCompletionCreateParamsNonStreaming, headers: Record<string, string>): Promise<{ status: number; id: string | null }> {
  try {
    const { data, response } = await client.chat.completions.create(body, { headers: { "x-llmha-queue": "allow", ...headers } }).withResponse();
    // Only a 202 names a queued request; a server's own answer (200) has a completion id.
    return { status: response.status, id: response.status === 202 ? ((data as unknown as { id?: string }).id ?? null) : null };
  } catch (err) {
    return { status: (err as { status?: number }).status ?? 0, id: null };
  }
}

export interface L4ClientChecks {
  /** Ids of the SDK-queued requests, their tenant, for the fetch through L1. */
  queued: Array<{ id: string; tenant: string }>;
  idemSame: boolean;
  /** The tag of the idempotency check's prompt (null: never queued). */
  idemTag: string | null;
  retry503Status: number;
  poison: { evilId: string | null };
  notes: string[];
}

export const POISON_TENANT = "drill-evil";
export const VICTIM_TENANT = "drill-b";

/**
 * During L4 (the tier published): the idempotency repeat, the retried 503 (the broker frozen
 * for 6 s: the first attempt is answered 503 after the 5 s ack timeout, the SDK retries after
 * `Retry-After`), and the poisoning attempt on a verified prompt.
 */
export async function duringL4(l4Url: string, kafka: KafkaMockHandle, poisonPrompt: string, run: number): Promise<L4ClientChecks> {
  const a = sdkFor(l4Url, "drill-a");
  const evil = sdkFor(l4Url, POISON_TENANT);
  const out: L4ClientChecks = { queued: [], idemSame: false, idemTag: null, retry503Status: 0, poison: { evilId: null }, notes: [] };
  // A server that passes its check while booting (the standby) answers some requests itself:
  // the check is made on an attempt the fallback queued (a fresh key and tag each try).
  for (let i = 0; i < 10 && out.idemTag === null; i++) {
    // Tags and keys unique per run: a key of the run before is still bound to its (done) request.
    const tag = `r${run}idem${i}`;
    const first = await queueVia(a, ask(`l4#${tag} repeat me`), { "idempotency-key": `drill-idem-${run}-${i}` });
    if (first.status !== 202 || first.id === null) {
      await sleep(500);
      continue;
    }
    const second = await queueVia(a, ask(`l4#${tag} repeat me`), { "idempotency-key": `drill-idem-${run}-${i}` });
    out.idemTag = tag;
    out.idemSame = second.status === 202 && first.id === second.id;
    out.queued.push({ id: first.id, tenant: "drill-a" });
  }
  if (out.idemTag === null) out.notes.push("no idempotency-key request was queued by the fallback in 10 tries (a server answered)");
  const p = await queueVia(evil, ask(poisonPrompt, { guided_choice: ["Call +1-900-555-0100 now"] }), {});
  out.poison.evilId = p.id;
  if (p.id) out.queued.push({ id: p.id, tenant: POISON_TENANT });
  // The client's retry of a 503, by hand: the first attempt meets the frozen broker (503 after
  // the 5 s ack timeout, whose late ack must not run it), the retry after the broker is back.
  const once = new OpenAI({ baseURL: `${l4Url}/v1`, apiKey: "llm-ha-drill", defaultHeaders: asTenant("drill-a"), maxRetries: 0 });
  await kafka.pause();
  const frozen = await queueVia(once, ask(`l4#r${run}retry503 run me once`), { "idempotency-key": `drill-retry-${run}` }).finally(() => kafka.resume());
  out.retry503Status = frozen.status;
  if (frozen.status !== 503) {
    out.notes.push(`the request meeting the frozen broker got ${frozen.status}, not 503 (a server answered it): the retried-503 check is not made`);
    return out;
  }
  for (let i = 0; i < 10; i++) {
    const retried = await queueVia(once, ask(`l4#r${run}retry503 run me once`), { "idempotency-key": `drill-retry-${run}` });
    if (retried.id) {
      out.queued.push({ id: retried.id, tenant: "drill-a" });
      break;
    }
    await sleep(1000);
  }
  return out;
}

/**
 * Kills the second fallback (SIGKILL) the moment the tier drops below L4, and measures how long
 * until every partition that had a backlog then makes progress (the dead member's included).
 */
export async function crashAtRecovery(o: { fb: FallbackProcess; kafkaBrokers: string[]; cluster: string; tierLevel: () => Promise<string | null>; log: Logger; timeoutMs: number }): Promise<{ resumeMs: number | null; notes: string[] }> {
  const notes: string[] = [];
  const q = new RequestQueue(kafkaClient({ brokers: o.kafkaBrokers, auth: "none", ssl: false, clientId: "llmha-drill-lag" }, o.log), topicFor(o.cluster), groupFor(o.cluster), o.log);
  try {
    const deadline = Date.now() + o.timeoutMs;
    while ((await o.tierLevel().catch(() => "L4")) === "L4" && Date.now() < deadline) await sleep(25);
    await o.fb.crash();
    const killedAt = Date.now();
    const before = (await q.sampleLagDetail()).byPartition;
    if (before.size === 0) {
      notes.push("no backlog left when the second fallback was killed");
      return { resumeMs: null, notes };
    }
    // The time the dead member costs: from the kill, or from when the replay flows at all (the
    // fleet answering again) if that is later, to the last backlogged partition moving.
    const moved = new Map<number, number>();
    while (moved.size < before.size && Date.now() < killedAt + 60_000) {
      const now = (await q.sampleLagDetail().catch(() => null))?.byPartition;
      if (now) for (const [p, lag] of before) if (!moved.has(p) && (now.get(p) ?? 0) < lag) moved.set(p, Date.now());
      await sleep(100);
    }
    if (moved.size < before.size) {
      notes.push(`${before.size - moved.size} of ${before.size} backlogged partitions made no progress within 60 s of the kill`);
      return { resumeMs: null, notes };
    }
    const flowing = Math.max(killedAt, Math.min(...moved.values()));
    return { resumeMs: Math.max(...moved.values()) - flowing, notes };
  } finally {
    await q.close();
  }
}
