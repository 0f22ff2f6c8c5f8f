/**
 * The fake inference server itself, whatever kind it imitates: its lifecycle (both ports, opening
 * and closing the inference listener as the mode asks), its counters, and the fault modes' effect
 * on completions (`infer`: latency per token, streams, the query of death). Each kind's endpoints and error bodies come from that kind's file.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { freePort, sleep } from "../../../agent/src/util/net";
import { handleAdmin } from "./admin";
import type { Body, Completion, Engine, KindApi } from "./kind";
import { LLAMACPP } from "./llamacpp";
import { OPENAI } from "./openai";
import {
  CORRUPT_TOKEN_TEXT, DEFAULT_SETTINGS, FAKE_SERVER_HEADER, FakeInferenceSettingsError, INFERENCE_KINDS, parseSettingsChange, QUERY_OF_DEATH_MARKER, WRONG_MODEL_ID,
  type FakeInference, type FakeInferenceMode, type FakeInferenceOptions, type FakeInferenceSettings, type FakeInferenceState, type FakeInferenceStats, type InferenceKind,
} from "./settings";
import { sendStream, TOKEN_TEXT } from "./stream";
import { corruptText, greedyAnswer, pythonJson } from "./greedy";
import { TGI } from "./tgi";
import { TRITON } from "./triton";
import { VLLM } from "./vllm";
import { bearerMatches, json, listen, readBody, send, shut, type Reply } from "./wire";

const KINDS: Readonly<Record<InferenceKind, KindApi>> = { vllm: VLLM, tgi: TGI, triton: TRITON, llamacpp: LLAMACPP, openai: OPENAI };

/** About four characters a token, as for English text with a BPE tokenizer. */
const promptTokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));

/** One completion generating: its timing, and how long a wedge held it. */
interface Generation {
  startedAt: number;
  firstMs: number;
  tokens: number;
  tokenMs: number;
  /** Time spent frozen by a wedge, already over. */
  pausedMs: number;
  /** Since when a wedge holds it, or null. */
  frozenAt: number | null;
}

/** Callers hold it as a `FakeInference`; its kind's handlers see it as an `Engine`. */
class FakeInferenceServer implements FakeInference, Engine {
  readonly url: string;
  readonly adminUrl: string;
  readonly created = Math.floor(Date.now() / 1000);
  private current: FakeInferenceSettings;
  private readonly api: KindApi;
  private readonly counters: FakeInferenceStats = {
    requests: 0, served: 0, failed: 0, inFlight: 0, waiting: 0, streamed: 0, streaming: 0, generationTokens: 0, promptTokens: 0, corruptServed: 0,
  };
  /** Completions per drill tag (a last message starting `l4#<tag> `): how often one L4 request reached a server. */
  private readonly tagged = new Map<string, number>();
  /** Per drill tag, who sent each run: the replay's request id (`x-llmha-replay`) or `direct`. */
  private readonly taggedVia = new Map<string, string[]>();
  private readonly inference: Server;
  private readonly admin: Server;
  private listening = false;
  /** Completions generating now. */
  private readonly active = new Set<Generation>();
  /** Slots taken under `maxRunning` (generating, or woken from the queue and about to). */
  private slots = 0;
  /** Completions a wedge holds before they started: woken when it ends. */
  private readonly wedgeWaiters = new Set<() => void>();
  /** Completions waiting for a slot under `maxRunning`. */
  private readonly queue: (() => void)[] = [];
  private closed = false;
  /** Mode changes run one at a time, since opening and closing the listener takes a turn of the loop. */
  private changes: Promise<unknown> = Promise.resolve();

  constructor(
    readonly kind: InferenceKind,
    readonly port: number,
    readonly adminPort: number,
    settings: FakeInferenceSettings,
    private readonly onQueryOfDeath?: () => void,
    readonly host = "127.0.0.1",
    private readonly apiKey: string | null = null,
  ) {
    this.current = settings;
    this.api = KINDS[kind];
    this.url = `http://${host}:${port}`;
    this.adminUrl = `http://${host}:${adminPort}`;
    this.inference = createServer((req, res) => void this.onInference(req, res));
    this.admin = createServer((req, res) => void handleAdmin(this, req, res));
  }

  get settings(): Readonly<FakeInferenceSettings> {
    return this.current;
  }

  async start(): Promise<void> {
    await listen(this.admin, this.adminPort, this.host);
    await this.applyListener();
  }

  setMode(change: FakeInferenceMode | Partial<FakeInferenceSettings>): Promise<FakeInferenceState> {
    const patch = parseSettingsChange(typeof change === "string" ? { mode: change } : change);
    const next = this.changes.then(async () => {
      const wasWedged = this.current.mode === "wedged";
      // Another revision is another process on a real node (new weights, a restart): its clients'
      // connections end, as they would. The agent's watch connection then has it read the model
      // list at once, as it does after a real restart.
      const restarted = patch.revision !== undefined && patch.revision !== this.current.revision;
      this.current = { ...this.current, ...patch };
      if (restarted) this.inference.closeAllConnections();
      // A wedged engine stops every completion it runs, not only the new ones.
      if (!wasWedged && this.current.mode === "wedged") for (const g of this.active) g.frozenAt ??= Date.now();
      if (wasWedged && this.current.mode !== "wedged") this.releaseWedged();
      this.nextInQueue();
      await this.applyListener();
      return this.state();
    });
    this.changes = next.catch(() => undefined);
    return next;
  }

  state(): FakeInferenceState {
    return { ...this.current, kind: this.kind, port: this.port, adminPort: this.adminPort, listening: this.listening };
  }

  /** The counters; `generationTokens` includes the tokens of completions still generating. */
  stats(): FakeInferenceStats {
    const now = Date.now();
    let partial = 0;
    for (const g of this.active) partial += this.producedBy(g, now);
    return { ...this.counters, generationTokens: this.counters.generationTokens + partial, tagged: Object.fromEntries(this.tagged), taggedVia: Object.fromEntries(this.taggedVia) };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.releaseWedged();
    await this.changes;
    await Promise.all([shut(this.inference), shut(this.admin)]);
    this.listening = false;
  }

  servedModel(): string | undefined {
    if (this.current.mode === "unloaded") return undefined;
    return this.current.mode === "wrong-model" ? WRONG_MODEL_ID : this.current.model;
  }

  notReady(): boolean {
    return this.current.mode === "loading" || this.current.mode === "loading503" || this.current.mode === "failed-load";
  }

  loadFailed(): boolean {
    return this.current.mode === "failed-load";
  }

  unavailable(): Reply {
    return this.api.unavailable(this);
  }

  modelNotFound(model: string): Reply {
    return this.api.modelNotFound(model);
  }

  notFound(): Reply {
    return this.api.notFound();
  }

  /**
   * One completion through the current mode: refused by model or mode, held forever when wedged,
   * queued while `maxRunning` completions generate, or answered after the mode's latency (the
   * first token) plus `tokenMs` for each further token, whole or as a stream. Tokens count as
   * they are generated (the engine's progress counters), and stop counting while the engine is
   * wedged. A prompt with the query-of-death marker kills the server first.
   */
  async infer(res: ServerResponse, c: Completion): Promise<Reply | undefined> {
    let { mode } = this.current;
    const { tokenMs } = this.current;
    let reply: Reply | undefined;
    if (this.notReady()) reply = this.unavailable();
    else if (mode === "unloaded" || (c.model !== undefined && c.model !== this.servedModel())) reply = this.modelNotFound(c.model ?? this.current.model);
    else if (mode === "error5xx") reply = this.api.internalError();
    if (reply) {
      this.counters.failed++;
      return reply;
    }
    if (this.current.queryOfDeath && c.prompt.includes(QUERY_OF_DEATH_MARKER)) {
      this.queryOfDeath();
      return undefined;
    }
    if (c.stream) this.counters.streamed++;
    this.counters.inFlight++;
    let answered = false;
    let gone = false;
    let held = false;
    let gen: Generation | null = null;
    res.on("close", () => {
      if (answered) return;
      gone = true;
      this.counters.inFlight--;
      this.counters.failed++;
      if (held) this.counters.waiting--;
      if (gen) this.endGeneration(gen);
    });
    if (mode === "wedged") {
      // A wedged engine accepts the request and does not schedule it: held until the wedge ends
      // (then it runs as any other) or the client gives up.
      this.counters.waiting++;
      held = true;
      await new Promise<void>((resolve) => {
        this.wedgeWaiters.add(resolve);
        res.once("close", () => {
          this.wedgeWaiters.delete(resolve);
          resolve();
        });
      });
      if (gone || this.closed) return undefined;
      this.counters.waiting--;
      held = false;
      mode = this.current.mode;
    }
    if (this.current.maxRunning > 0 && this.slots >= this.current.maxRunning) {
      held = true;
      this.counters.waiting++;
      // nextInQueue takes the slot for us before it wakes us.
      await new Promise<void>((resolve) => this.queue.push(resolve));
      if (gone) {
        this.releaseSlot();
        return undefined;
      }
      this.counters.waiting--;
      held = false;
    } else {
      this.slots++;
    }
    const base = mode === "slow" ? this.current.slowMs : this.current.latencyMs;
    const first = base + Math.random() * this.current.jitterMs;
    const stream = mode === "garbage" ? undefined : c.stream;
    const prompt = promptTokens(c.prompt);
    const g: Generation = { startedAt: Date.now(), firstMs: first, tokens: c.maxTokens, tokenMs, pausedMs: 0, frozenAt: this.current.mode === "wedged" ? Date.now() : null };
    gen = g;
    this.active.add(g);
    this.counters.promptTokens += prompt;
    const { corruption } = this.current;
    // `corrupt` answers "!" to everything, canaries included; the other corruptions change a canary's greedy answer.
    const greedy = c.seeded && mode !== "corrupt" ? greedyAnswer(c.prompt, c.maxTokens, this.current) : undefined;
    if (corruption !== "none" && !c.seeded) this.counters.corruptServed++;
    const text = mode === "corrupt" ? CORRUPT_TOKEN_TEXT : corruption === "garbage" || corruption === "drift" ? corruptText(c.prompt, 1) : TOKEN_TEXT;
    await this.runFor(g, stream ? first : first + (c.maxTokens - 1) * tokenMs);
    if (gone) return undefined;
    if (stream) {
      // A stream whose first chunk is on its way: what a crash now would cut.
      this.counters.streaming++;
      const whole = await sendStream(res, stream, c.maxTokens, prompt, tokenMs, () => gone, () => this.thaw(g), greedy ? greedy.map((t) => t.text) : text).finally(() => this.counters.streaming--);
      if (!whole) return undefined;
    }
    answered = true;
    this.counters.inFlight--;
    this.counters.served++;
    this.endGeneration(g, true);
    if (mode === "garbage") {
      send(res, json(200, { result: "ok", choices: "none" }));
      return undefined;
    }
    // A seeded greedy request (a canary) gets the deterministic answer; Python servers write NaN bare.
    if (!stream) send(res, { status: 200, type: "application/json", body: pythonJson(c.ok(greedy ? greedy.map((g) => g.text).join("") : text.repeat(c.maxTokens), c.maxTokens, prompt, greedy)) });
    return undefined;
  }

  /** Waits `ms` of generation time; time while the engine is wedged does not count. */
  private async runFor(g: Generation, ms: number): Promise<void> {
    const end = g.startedAt + ms;
    for (;;) {
      await this.thaw(g);
      const left = end + g.pausedMs - Date.now();
      if (left <= 0) return;
      await sleep(left);
      if (g.frozenAt === null && Date.now() >= end + g.pausedMs) return;
    }
  }

  /** Holds a generation while the engine is wedged, then carries on where it stopped. */
  private async thaw(g: Generation): Promise<void> {
    while (g.frozenAt !== null) {
      if (this.current.mode !== "wedged" || this.closed) {
        g.pausedMs += Date.now() - g.frozenAt;
        g.frozenAt = null;
        return;
      }
      await sleep(25);
    }
  }

  /** Tokens a generation has produced so far. */
  private producedBy(g: Generation, now: number): number {
    const t = (g.frozenAt ?? now) - g.startedAt - g.pausedMs - g.firstMs;
    if (t < 0) return 0;
    return Math.min(g.tokens, 1 + Math.floor(t / Math.max(1, g.tokenMs)));
  }

  private endGeneration(g: Generation, complete = false): void {
    if (!this.active.delete(g)) return;
    this.counters.generationTokens += complete ? g.tokens : this.producedBy(g, Date.now());
    this.releaseSlot();
  }

  private releaseWedged(): void {
    const all = [...this.wedgeWaiters];
    this.wedgeWaiters.clear();
    for (const go of all) go();
  }

  private releaseSlot(): void {
    this.slots--;
    this.nextInQueue();
  }

  /** Wakes queued completions while slots are free, taking each one's slot for it. */
  private nextInQueue(): void {
    while (this.queue.length > 0 && (this.current.maxRunning === 0 || this.slots < this.current.maxRunning)) {
      const go = this.queue.shift();
      if (!go) break;
      this.slots++;
      go();
    }
  }

  /** A request that kills the engine: the process exits (`cli.ts`), or in a test both ports close for good, every connection dropped. */
  private queryOfDeath(): void {
    if (this.onQueryOfDeath) {
      this.onQueryOfDeath();
      return;
    }
    this.closed = true;
    this.listening = false;
    void shut(this.inference);
    void shut(this.admin);
  }

  /** Closed for a crashed process, and while a kind that opens its port only once loaded is still loading. */
  private shouldListen(): boolean {
    const { mode } = this.current;
    if (this.closed || mode === "refused") return false;
    // A failed load ends the process, except Triton's, which stays live with the model UNAVAILABLE.
    if (mode === "failed-load") return this.kind === "triton";
    return !(mode === "loading" && this.api.closedWhileLoading);
  }

  private async applyListener(): Promise<void> {
    const want = this.shouldListen();
    if (want === this.listening) return;
    if (want) await listen(this.inference, this.port, this.host);
    else await shut(this.inference);
    this.listening = want;
  }

  private async onInference(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.counters.requests++;
    // Which server answered, for the drill's accounting of cut streams (a stand-in's header; no real server sends it).
    res.setHeader(FAKE_SERVER_HEADER, `${this.host}:${this.port}`);
    const path = (req.url ?? "/").split("?")[0];
    if (this.apiKey !== null && path.startsWith("/v1") && req.method !== "OPTIONS" && !bearerMatches(req.headers.authorization, this.apiKey)) {
      send(res, json(401, { error: "Unauthorized" }));
      return;
    }
    let body: Body = {};
    try {
      if (req.method === "POST") {
        const parsed: unknown = JSON.parse((await readBody(req)) || "{}");
        if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) body = parsed as Body;
      }
    } catch {
      send(res, this.api.badRequest("request body is not valid JSON"));
      return;
    }
    const tag = /^l4#(\S+)/.exec(String((body.messages as Array<{ content?: unknown }> | undefined)?.at(-1)?.content ?? ""))?.[1];
    if (tag) {
      this.tagged.set(tag, (this.tagged.get(tag) ?? 0) + 1);
      const via = req.headers["x-llmha-replay"];
      this.taggedVia.set(tag, [...(this.taggedVia.get(tag) ?? []), typeof via === "string" ? via : "direct"]);
    }
    try {
      const reply = await this.api.route(this, req.method ?? "GET", path, body, res);
      if (reply) send(res, reply);
    } catch (err) {
      // A bug in the fake must show as a 500, not as a crash that a test would read as an inference crash.
      send(res, json(500, { error: err instanceof Error ? err.message : String(err) }));
    }
  }
}

/** Starts a fake inference server on loopback. */
export async function startFakeInference(opts: FakeInferenceOptions = {}): Promise<FakeInference> {
  const kind = opts.kind ?? "vllm";
  if (!INFERENCE_KINDS.includes(kind)) throw new FakeInferenceSettingsError(`kind must be one of ${INFERENCE_KINDS.join(", ")}`);
  const { kind: _k, host: _h, port: _p, adminPort: _a, onQueryOfDeath: _q, apiKey, loadMs = 0, ...rest } = opts;
  if (apiKey !== undefined && apiKey === "") throw new FakeInferenceSettingsError("apiKey must not be empty");
  if (!(Number.isFinite(loadMs) && loadMs >= 0)) throw new FakeInferenceSettingsError("loadMs must be a number >= 0");
  const settings = { ...DEFAULT_SETTINGS, ...parseSettingsChange(rest) };
  const port = opts.port || (await freePort());
  const adminPort = opts.adminPort || (await freePort());
  // A model load: `loading` first, then the configured mode (unless the admin API changed the mode meanwhile).
  const server = new FakeInferenceServer(kind, port, adminPort, loadMs > 0 ? { ...settings, mode: "loading" } : settings, opts.onQueryOfDeath, opts.host, apiKey ?? null);
  await server.start();
  if (loadMs > 0) setTimeout(() => void (server.state().mode === "loading" ? server.setMode(settings.mode).catch(() => undefined) : undefined), loadMs).unref();
  return server;
}
