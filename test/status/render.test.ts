import { describe, expect, it } from "vitest";
import { RedisKeys } from "../../agent/src/fleet/redis/keys";
import { ansiSpans, terminalSvg } from "../../lab/status/picture";
import { AUTO_LIST_ALL, formatAge, needsAttention, renderFleetView, stripAnsi } from "../../agent/src/ops/status/render";
import type { FleetView, NodeRow } from "../../agent/src/ops/status/types";
import { eventRow } from "../../agent/src/ops/status/events";

const NOW = 1_800_000_000_000;
const keys = new RedisKeys("prod");

function node(id: string, over: Partial<NodeRow> = {}): NodeRow {
  return {
    id, az: "us-east-1a", status: "HEALTHY", phase: "serving", weight: 100, loadScore: 0.5, gpus: 8, gpusExpected: 8,
    soft: [], hard: [], model: "m", alive: true, takesTraffic: true, lastHeartbeatAt: NOW - 400, heartbeatAgeMs: 400, ...over,
  };
}

function view(over: Partial<FleetView> = {}): FleetView {
  return {
    version: 1, cluster: "prod", redis: "redis://redis:6379", now: NOW,
    leader: { holder: "a1/7", token: 42, ttlMs: 15_500, highestToken: 42, highestHolder: "a1/7" },
    tier: { level: "L1", reason: "nodes out: a3", token: 42, updatedAt: NOW - 1000, ageMs: 1000, stale: false },
    standby: null,
    actuation: null,
    fallback: { l4: false, queue: null },
    suspect: { codes: ["PROBE_SLOW"], counts: { PROBE_SLOW: 3 }, updatedAt: NOW, ageMs: 0 },
    azs: [{
      az: "us-east-1a", standby: false,
      published: { state: "OK", healthyCapacity: 16, totalCapacity: 24, nodes: 3, nodesIn: 2, since: NOW - 95_000, updatedAt: NOW, ageMs: 0, token: 42, stale: false },
      nodes: [
        node("a1", { soft: ["PROBE_SLOW"] }),
        node("a2", { status: "DEGRADED", weight: 50, soft: ["ENGINE_QUEUE_" + "X".repeat(90)] }),
        node("a3", { status: "UNHEALTHY", weight: 0, gpus: 7, hard: ["GPU_MISSING"], takesTraffic: false }),
      ],
    }],
    events: [
      eventRow(`${NOW - 3000}-0`, ["type", "node", "node", "a3", "az", "us-east-1a", "from", "HEALTHY", "status", "UNHEALTHY", "soft", "", "hard", "GPU_MISSING"], NOW, keys),
      eventRow(`${NOW - 60_000}-0`, ["type", "tier", "key", "llmha:prod:tier", "from", "L0", "level", "L1", "reason", "nodes out: a3", "token", "41", "leader", "b1/9"], NOW, keys),
    ],
    empty: false,
    ...over,
  };
}

describe("status renderer", () => {
  it("colours by severity only when asked: DOWN-like red, DEGRADED yellow, healthy green", () => {
    const plain = renderFleetView(view()).join("\n");
    expect(plain).not.toContain("\x1b[");
    const lines = renderFleetView(view(), { color: true });
    const row = (id: string) => lines.find((l) => stripAnsi(l).startsWith(`  ${id} `))!;
    expect(row("a1")).toContain("\x1b[32mHEALTHY");
    expect(row("a2")).toContain("\x1b[33mDEGRADED");
    expect(row("a3")).toContain("\x1b[31mUNHEALTHY");
    expect(row("a3")).toContain("\x1b[31mhard GPU_MISSING");
    expect(lines.map(stripAnsi)).toEqual(renderFleetView(view()));
  });

  it("fits 100 columns, marks suspect codes, shows other terms' tokens on events", () => {
    const lines = renderFleetView(view());
    for (const l of lines) expect([...l].length).toBeLessThanOrEqual(100);
    expect(lines.find((l) => l.startsWith("  a2 "))).toMatch(/soft ENGINE_QUEUE_X+…$/);
    expect(lines.find((l) => l.startsWith("  a1 "))).toMatch(/suspect PROBE_SLOW$/);
    expect(lines).toContain("suspect  PROBE_SLOW (3 nodes)  blast-radius cap: nodes failing only these stay in");
    expect(lines).toContain("us-east-1a  OK  16/24 GPUs healthy  2/3 nodes in  since 95s ago");
    expect(lines).toContain("    3s ago  node a3 (us-east-1a) HEALTHY → UNHEALTHY hard GPU_MISSING");
    expect(lines).toContain("   60s ago  tier L0 → L1: nodes out: a3  token 41");
  });

  it("says what is missing: no leader, a leader fenced out, a stale tier", () => {
    const none = renderFleetView(view({ leader: { holder: null, token: null, ttlMs: null, highestToken: 42, highestHolder: "a1/7" } }));
    expect(none).toContain("leader   none: lease free, AZ states and tier not refreshed  highest accepted token 42");
    const fenced = renderFleetView(view({ leader: { holder: "b1/9", token: 41, ttlMs: 900, highestToken: 42, highestHolder: "a1/7" } }));
    expect(fenced[2]).toMatch(/token 41 +below the highest accepted token 42 \(a1\/7\): its writes are refused/);
    const stale = renderFleetView(view({ tier: { level: "L0", reason: "all AZs OK", token: 40, updatedAt: NOW - 45_000, ageMs: 45_000, stale: true } }));
    expect(stale[3]).toBe("tier     L0  all AZs OK  (refreshed 45s ago)  stale: no leader refreshed it");
  });

  it("shows L4 and the fallback's queue: red when active, the depth yellow when not zero, stale when no one samples it", () => {
    const queue = { depth: 3, topic: "llmha.prod.requests", updatedAt: NOW - 2000, ageMs: 2000, stale: false };
    const active = renderFleetView(view({ fallback: { l4: true, queue } }), { color: true });
    const line = active.find((l) => stripAnsi(l).startsWith("L4 "))!;
    expect(stripAnsi(line)).toBe("L4       ACTIVE  queue 3 requests  (llmha.prod.requests, 2s ago)  L1 sends to the fallback");
    expect(line).toContain("\x1b[31mACTIVE");
    expect(line).toContain("\x1b[33m3 requests");
    expect(renderFleetView(view())).toContain("L4       inactive  queue not published (no fallback with Kafka)");
    expect(renderFleetView(view({ fallback: { l4: null, queue: { ...queue, depth: null, ageMs: 40_000, stale: true } } }))).toContain(
      "L4       unknown (no tier)  queue unknown  stale: not sampled  (llmha.prod.requests, 40s ago)",
    );
  });

  it("ages read as a person says them", () => {
    expect([0, 999, 3000, 119_000, 120_000, 7_199_000, 7_200_000, 172_800_000].map(formatAge)).toEqual(
      ["0s ago", "0s ago", "3s ago", "119s ago", "2m ago", "119m ago", "2h ago", "2d ago"],
    );
  });

  it("events by type: action, suspect, standby, an unknown type as key=value", () => {
    const ev = (fields: string[]) => eventRow(`${NOW}-0`, fields, NOW, keys);
    expect(ev(["type", "action", "action", "shift.start", "az", "b", "actuator", "aws", "outcome", "failed", "detail", "throttled"])).toMatchObject({
      summary: "action shift.start b failed (aws): throttled", tone: "bad",
    });
    expect(ev(["type", "suspect", "from", "", "codes", "PROBE_SLOW"]).summary).toBe("suspect checks: PROBE_SLOW (nodes failing only these kept in)");
    expect(ev(["type", "suspect", "from", "PROBE_SLOW", "codes", ""])).toMatchObject({ summary: "suspect checks cleared (were PROBE_SLOW)", tone: "ok" });
    expect(ev(["type", "standby", "from", "1", "az", "c", "wake", "0", "reason", "active AZs OK"]).summary).toBe("standby c back to schedule: active AZs OK");
    expect(ev(["type", "shift", "from", "", "shiftAz", "a", "shiftReason", "AZ a DOWN"])).toMatchObject({ summary: "zonal shift away from a: AZ a DOWN", tone: "bad" });
    expect(ev(["type", "shift", "from", "a", "shiftAz", "", "shiftReason", "AZ a OK"]).summary).toBe("zonal shift away from a ended: AZ a OK");
    expect(ev(["type", "foreign-action", "kind", "shift", "az", "a", "id", "zs-9", "detail", "l1-a shifted away from use1-az1 by zs-9"])).toMatchObject({
      summary: "not made by llm-ha: shift change in a: l1-a shifted away from use1-az1 by zs-9", tone: "bad",
    });
    expect(ev(["type", "future", "x", "1"]).summary).toBe("type=future x=1");
  });
});

describe("status at fleet scale", () => {
  /** 2,000 nodes over three AZs, all healthy but the few given. */
  function bigView(odd: Record<string, Partial<NodeRow>>): FleetView {
    const azs = ["us-east-1a", "us-east-1b", "us-east-1c"].map((az, k) => ({
      az, standby: false,
      published: { state: "OK" as const, healthyCapacity: 5000, totalCapacity: 5336, nodes: 667, nodesIn: 665, since: NOW - 95_000, updatedAt: NOW, ageMs: 0, token: 42, stale: false },
      nodes: Array.from({ length: k === 2 ? 666 : 667 }, (_, i) => {
        const id = `${az.slice(-1)}${String(i).padStart(4, "0")}`;
        return node(id, { az, ...odd[id] });
      }),
    }));
    return view({ azs });
  }

  it("lists only the nodes to look at when the fleet is large, the rest counted per AZ, and every node when asked", () => {
    const v = bigView({ a0007: { status: "UNHEALTHY", weight: 0, hard: ["GPU_MISSING"], gpus: 7 }, b0100: { phase: "warmup" }, b0200: { soft: ["PROBE_SLOW"] }, c0300: { alive: false, status: "EXPIRED" } });
    const lines = renderFleetView(v);
    const rows = lines.filter((l) => /^ {2}[abc]\d{4} /.test(l));
    // b0200's only reason is a code the leader holds as suspect fleet-wide: not the node's own.
    expect(rows.map((l) => l.trim().split(/\s+/)[0])).toEqual(["a0007", "b0100", "c0300"]);
    expect(lines).toContain("  666 more nodes HEALTHY and serving, not listed  (--nodes all lists them)");
    expect(lines).toContain("  665 more nodes HEALTHY and serving, not listed  (--nodes all lists them)");
    expect(lines.length).toBeLessThan(50);
    const all = renderFleetView(v, { nodes: "all" });
    expect(all.filter((l) => /^ {2}[abc]\d{4} /.test(l))).toHaveLength(2000);
    expect(all.join("\n")).not.toContain("not listed");
    // One AZ, every node of it.
    const one = renderFleetView(v, { nodes: "all", az: "us-east-1b" });
    expect(one.filter((l) => /^ {2}[abc]\d{4} /.test(l)).every((l) => l.startsWith("  b"))).toBe(true);
    expect(one.filter((l) => /^ {2}b\d{4} /.test(l))).toHaveLength(667);
    expect(renderFleetView(v, { az: "us-east-1z" })).toContain("no AZ us-east-1z in cluster prod (AZs: us-east-1a, us-east-1b, us-east-1c)");
    // `auto` counts the AZs shown: a small AZ of a large fleet is listed whole.
    const small = bigView({});
    small.azs.push({ ...small.azs[0], az: "us-east-1d", nodes: [node("d0001", { az: "us-east-1d" }), node("d0002", { az: "us-east-1d" })] });
    expect(renderFleetView(small, { az: "us-east-1d" }).filter((l) => /^ {2}d\d{4} /.test(l))).toHaveLength(2);
    expect(renderFleetView(small).filter((l) => /^ {2}d\d{4} /.test(l))).toHaveLength(0);
  });

  it("an AZ with nothing to look at is one line; a small fleet lists every node unless asked otherwise", () => {
    const lines = renderFleetView(bigView({}));
    expect(lines.filter((l) => /^ {2}NODE /.test(l))).toHaveLength(0);
    expect(lines).toContain("  667 nodes HEALTHY and serving, not listed  (--nodes all lists them)");
    const small = view();
    expect(small.azs[0].nodes.length).toBeLessThanOrEqual(AUTO_LIST_ALL);
    expect(renderFleetView(small).filter((l) => /^ {2}a\d /.test(l))).toHaveLength(3);
    const att = renderFleetView(small, { nodes: "attention" });
    expect(att.filter((l) => /^ {2}a\d /.test(l)).map((l) => l.trim().split(/\s+/)[0])).toEqual(["a2", "a3"]);
    expect(att).toContain("  1 more node HEALTHY and serving, not listed  (--nodes all lists them)");
  });

  it("a node needs a look when it is not HEALTHY, not serving, short of GPUs, silent, or has a reason of its own", () => {
    const suspect = new Set(["PROBE_SLOW"]);
    expect(needsAttention(node("x"), suspect)).toBe(false);
    expect(needsAttention(node("x", { soft: ["PROBE_SLOW"] }), suspect)).toBe(false);
    expect(needsAttention(node("x", { soft: ["PROBE_SLOW"] }), new Set())).toBe(true);
    expect(needsAttention(node("x", { status: "DEGRADED" }), suspect)).toBe(true);
    expect(needsAttention(node("x", { phase: "draining" }), suspect)).toBe(true);
    expect(needsAttention(node("x", { gpus: 7 }), suspect)).toBe(true);
    expect(needsAttention(node("x", { alive: false }), suspect)).toBe(true);
    expect(needsAttention(node("x", { hard: ["XID_79"] }), suspect)).toBe(true);
  });
});

describe("status picture", () => {
  it("maps ANSI colours to SVG fills at the right columns", () => {
    const spans = ansiSpans("  a3    \x1b[31mUNHEALTHY  \x1b[0m  \x1b[1;7mX\x1b[0m");
    expect(spans.map((s) => [s.col, s.text, s.bold, s.inverse])).toEqual([
      [0, "  a3    ", false, false],
      [8, "UNHEALTHY  ", false, false],
      [19, "  ", false, false],
      [21, "X", true, true],
    ]);
    expect(spans[1].fill).not.toBe(spans[0].fill);
    const svg = terminalSvg(renderFleetView(view(), { color: true }), { command: "llm-ha status" });
    expect(svg).toMatch(/^<svg [^>]*width="812"/);
    expect(svg).toContain(">UNHEALTHY  </text>");
    expect(svg).toContain("→ UNHEALTHY hard GPU_MISSING</text>");
    expect(svg).not.toContain("\x1b");
  });
});

describe("the leader's actions", () => {
  it("shows the last standby and shift actions, failures in full", () => {
    const lines = renderFleetView(view({
      actuation: {
        actuator: "aws",
        standby: { action: "standby.wake", az: "us-east-1c", outcome: "applied", detail: "asg-c min 0→2", reason: "capacity lost", token: 42, at: NOW - 5000, ageMs: 5000 },
        shift: { action: "shift.start", az: "us-east-1a", outcome: "failed", detail: "AccessDeniedException", reason: "a DOWN", token: 42, at: NOW - 1000, ageMs: 1000, expiresAt: null },
        shiftAz: "us-east-1a",
      },
    })).map(stripAnsi);
    const actions = lines.filter((l) => l.includes("standby.wake") || l.includes("shift.start"));
    expect(actions[0]).toMatch(/^actions\s+aws standby\.wake us-east-1c\s+applied\s+5s ago\s+asg-c min 0→2/);
    expect(actions[1]).toMatch(/aws shift\.start us-east-1a\s+failed\s+1s ago\s+AccessDeniedException/);
    expect(renderFleetView(view()).map(stripAnsi).some((l) => /^actions\s+none yet/.test(l))).toBe(true);
  });
});
