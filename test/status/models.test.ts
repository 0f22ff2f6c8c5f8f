import { describe, expect, it } from "vitest";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { eventRow } from "../../agent/src/ops/status/events";
import { renderFleetView, stripAnsi } from "../../agent/src/ops/status/render";
import type { FleetView, ModelsView } from "../../agent/src/ops/status/types";

/** The `model` line of `llm-ha status` — the fleet's majority model and what differs. */
const NOW = 1_800_000_000_000;
const keys = new RedisKeys("prod");

function view(models: ModelsView | null | undefined): FleetView {
  return {
    version: 1, cluster: "prod", redis: "redis://redis:6379", now: NOW,
    leader: { holder: "a1/7", token: 42, ttlMs: 15_500, highestToken: 42, highestHolder: "a1/7" },
    tier: { level: "L0", reason: "all AZs OK", token: 42, updatedAt: NOW - 1000, ageMs: 1000, stale: false },
    standby: null, actuation: null, fallback: { l4: false, queue: null }, suspect: null,
    ...(models === undefined ? {} : { models }),
    azs: [], events: [], empty: false,
  };
}

const M = "meta-llama/Llama-3.1-70B-Instruct@1605565 dtype:bfloat16 ctx:8192";
const published = (over: Partial<ModelsView> = {}): ModelsView => ({
  majority: M, agreeing: 12, outliers: [], outlierCount: 0, outlierAzs: [], updatedAt: NOW - 4000, ageMs: 4000, stale: false, ...over,
});
const modelLine = (v: FleetView, o: { color?: boolean; width?: number } = {}) => renderFleetView(v, o).find((l) => stripAnsi(l).startsWith("model "));

describe("status: the model line", () => {
  it("says when nothing is published, and when no node serves a model yet", () => {
    expect(modelLine(view(undefined))).toBe("model    not published yet");
    expect(modelLine(view(null))).toBe("model    not published yet");
    expect(modelLine(view(published({ majority: null, agreeing: 0 })))).toBe("model    no node serves a model yet  (refreshed 4s ago)");
  });

  it("a uniform fleet: the majority and how many serve it, green", () => {
    expect(modelLine(view(published()), { width: 200 })).toBe(`model    ${M}  all 12 serving nodes  (refreshed 4s ago)`);
    expect(modelLine(view(published()), { color: true })).toContain("\x1b[32m  all 12 serving nodes\x1b[0m");
  });

  it("odd nodes: the count and the AZ serving none of it come first, then each node with what differs; long lines end in …", () => {
    const v = view(published({
      agreeing: 10, outlierCount: 3, outlierAzs: ["us-east-1c"],
      outliers: [
        { nodeId: "b7", model: "meta-llama/Llama-3.1-70B-Instruct@0e9e39f dtype:bfloat16 ctx:8192", differs: ["revision"] },
        { nodeId: "c1", model: "facebook/opt-125m", differs: ["id"] },
        { nodeId: "c2", model: "meta-llama/Llama-3.1-70B-Instruct@1605565 dtype:float16 ctx:8192", differs: ["dtype"] },
      ],
    }));
    const wide = modelLine(v, { width: 400 })!;
    expect(wide).toBe(
      `model    3 nodes differ, AZ us-east-1c serves none of it  majority ${M} (10 nodes): ` +
        "b7 meta-llama/Llama-3.1-70B-Instruct@0e9e39f dtype:bfloat16 ctx:8192 (revision), c1 facebook/opt-125m, " +
        "c2 meta-llama/Llama-3.1-70B-Instruct@1605565 dtype:float16 ctx:8192 (dtype)  (refreshed 4s ago)",
    );
    const narrow = modelLine(v)!;
    expect([...narrow].length).toBe(100);
    expect(narrow).toMatch(/^model {4}3 nodes differ, AZ us-east-1c serves none of it {2}majority meta-llama\/Llama-3\.1-70B-.*…$/);
    const colored = modelLine(v, { color: true, width: 400 })!;
    expect(colored).toContain("\x1b[33m3 nodes differ\x1b[0m");
    expect(colored).toContain("\x1b[31m, AZ us-east-1c serves none of it\x1b[0m");
  });

  it("more outliers than listed end in …; a stale publication says so before the list", () => {
    const v = view(published({ agreeing: 2, outlierCount: 60, outliers: [{ nodeId: "n1", model: "x", differs: ["id"] }], stale: true, ageMs: 45_000 }));
    expect(modelLine(v, { width: 400 })).toBe(`model    60 nodes differ  stale: no leader refreshed it  majority ${M} (2 nodes): n1 x, …  (refreshed 45s ago)`);
  });

  it("the leader's model events as lines", () => {
    const ev = (f: string[]) => eventRow(`${NOW - 1000}-0`, ["type", "model", "key", "llmha:prod:models", ...f], NOW, keys);
    expect(ev(["from", "", "majority", "llama", "outliers", "n4=opt-125m", "outlierCount", "1", "outlierAzs", ""])).toMatchObject({
      summary: "model: 1 node serve another model than llama: n4=opt-125m", tone: "warn",
    });
    expect(ev(["from", "", "majority", "llama", "outliers", "c1=opt,c2=opt", "outlierCount", "2", "outlierAzs", "c"])).toMatchObject({
      summary: "model: 2 nodes serve another model than llama: c1=opt, c2=opt; AZ c serves none of it", tone: "bad",
    });
    expect(ev(["from", "n4=opt-125m", "majority", "llama", "outliers", "", "outlierCount", "0"])).toMatchObject({ summary: "model: every serving node serves llama again", tone: "ok" });
    expect(ev(["from", "", "majority", "llama", "outliers", ""])).toMatchObject({ summary: "model: every serving node serves llama", tone: "info" });
  });
});
