/**
 * Correctness canaries, the pure parts: comparing answers within tolerance, the
 * decision with a clock (SUSPECT, re-check, MISMATCH held until a restart, the blast-radius cap),
 * and learning the expectation from the fleet's majority.
 */
import { describe, expect, it } from "vitest";
import { compareAnswers, parsePythonJson, type CanaryAnswer, type CanaryTolerance } from "../../agent/src/node/canary/answers";
import { canaryDrains, canaryStep, initialCanaryState, type CanaryRound, type CanaryState } from "../../agent/src/node/canary/decide";
import { fleetMajority, learnExpectations, type NodeAnswers } from "../../agent/src/node/canary/learn";
import { judge } from "../../agent/src/node/canary/runner";
import { evaluate, initialState, DEFAULT_WARMUP_STEPS } from "../../agent/src/node/evaluator/evaluate";

const TOL: CanaryTolerance = { prefixTokens: 4, logprobDelta: 0.1 };
const ans = (tokens: string[], logprobs: number[] | null = tokens.map(() => -0.5)): CanaryAnswer => ({ text: tokens.join(""), tokens, logprobs });
const RIGHT = ans([" a", " b", " c", " d", " e"]);

describe("comparing canary answers", () => {
  it("matches within the prefix and the logprob bound; a token or a logprob beyond them differs", () => {
    expect(compareAnswers(RIGHT, RIGHT, TOL)).toBeNull();
    // The fifth token is past the prefix: batch-dependent kernels may change it.
    expect(compareAnswers(ans([" a", " b", " c", " d", " X"]), RIGHT, TOL)).toBeNull();
    expect(compareAnswers(ans([" a", " b", " X", " d", " e"]), RIGHT, TOL)).toContain("token 2");
    expect(compareAnswers(ans([" a", " b", " c", " d"], [-0.5, -0.55, -0.5, -0.5]), RIGHT, TOL)).toBeNull();
    expect(compareAnswers(ans([" a", " b", " c", " d"], [-0.5, -0.9, -0.5, -0.5]), RIGHT, TOL)).toContain("logprob of token 1");
  });
  it("a NaN logprob is wrong on its own, and Python's bare NaN in a reply is read as NaN", () => {
    const b = parsePythonJson('{"choices":[{"text":" a","logprobs":{"token_logprobs":[NaN, -0.5, -Infinity]}}]}') as { choices: { logprobs: { token_logprobs: number[] } }[] };
    expect(b.choices[0].logprobs.token_logprobs.map((x) => Number.isNaN(x) || !Number.isFinite(x))).toEqual([true, false, true]);
    expect(compareAnswers(ans([" a", " b"], [Number.NaN, -0.5]), RIGHT, TOL)).toContain("not finite");
    expect(judge({ a1: ans([" a"], [Number.NaN]) }, {}, TOL)).toMatchObject({ outcome: "mismatch" });
  });
  it("text-only answers (Triton) are compared word by word; nothing to compare against is no verdict", () => {
    const t = (text: string): CanaryAnswer => ({ text, tokens: null, logprobs: null });
    expect(judge({ a1: t(" Paris is big and old") }, { a1: t(" Paris is big and new") }, TOL).outcome).toBe("match");
    expect(judge({ a1: t(" Lyon is big and old") }, { a1: t(" Paris is big and old") }, TOL).outcome).toBe("mismatch");
    expect(judge({ a1: t(" Paris") }, {}, TOL).outcome).toBe("none");
  });
});

describe("the canary decision", () => {
  const round = (set: "first" | "second", outcome: CanaryRound["outcome"], extra: Partial<CanaryRound> = {}): CanaryRound => ({ set, outcome, detail: outcome === "mismatch" ? "a1: token 0" : "", capped: false, serverStarts: 1, ...extra });
  const run = (rounds: CanaryRound[], t0 = 1000): CanaryState[] => {
    let s = initialCanaryState(t0);
    return rounds.map((r, i) => (s = canaryStep(s, r, t0 + (i + 1) * 100)));
  };

  it("first set differs → SUSPECT, re-checked with the second set; the second differing too → MISMATCH (drains)", () => {
    const [a, b, c] = run([round("first", "match"), round("first", "mismatch"), round("second", "mismatch")]);
    expect(a.phase).toBe("ok");
    expect([b.phase, b.next, canaryDrains(b)]).toEqual(["suspect", "second", false]);
    expect([c.phase, canaryDrains(c), c.since]).toEqual(["mismatch", true, 1300]);
  });
  it("the second set matching clears a one-off", () => {
    const s = run([round("first", "mismatch"), round("second", "match")]);
    expect(s.map((x) => x.phase)).toEqual(["suspect", "ok"]);
  });
  it("MISMATCH holds until the server restarted and both sets match again", () => {
    let s = run([round("first", "mismatch"), round("second", "mismatch")])[1];
    // Matching answers without a restart (the fault came and went): still out.
    s = canaryStep(s, round("first", "match"), 2000);
    expect(s.phase).toBe("mismatch");
    s = canaryStep(s, round("second", "match", { serverStarts: 2 }), 2100);
    expect(s.phase).toBe("mismatch");
    s = canaryStep(s, round("first", "match", { serverStarts: 2 }), 2200);
    expect([s.phase, s.since]).toEqual(["ok", 2200]);
  });
  it("a restart that still answers wrongly stays out", () => {
    let s = run([round("first", "mismatch"), round("second", "mismatch")])[1];
    s = canaryStep(s, round("first", "match", { serverStarts: 2 }), 2000);
    s = canaryStep(s, round("second", "mismatch", { serverStarts: 2 }), 2100);
    s = canaryStep(s, round("first", "match", { serverStarts: 2 }), 2200);
    expect(s.phase).toBe("mismatch");
  });
  it("most of the fleet disagreeing with the expectation is CAPPED: no drain", () => {
    const s = run([round("first", "mismatch", { capped: true }), round("first", "mismatch", { capped: true })]);
    expect(s.map((x) => [x.phase, canaryDrains(x)])).toEqual([["capped", false], ["capped", false]]);
  });
  it("a round with nothing to judge changes nothing", () => {
    const s = run([round("first", "mismatch"), round("second", "none")]);
    expect(s[1].phase).toBe("suspect");
  });
  it("the evaluator takes a mismatching node out with the hard CANARY_MISMATCH, and it comes back through rise", () => {
    const settings = { gpuCount: null, model: null, probeLatencyMs: 1000, wedgeMs: 500, probeStuckMs: 4000, modelRevision: null, fall: 2, rise: 2, warmupStepMs: 0, warmupSteps: DEFAULT_WARMUP_STEPS, degradedWeight: 50 };
    const model = (seq: number) => ({ seq, at: seq, value: { kind: "ready" as const, served: ["m"] } });
    const gpu = { seq: 1, at: 1, value: { kind: "ok" as const, gpus: [] } };
    let st = evaluate({ gpu, model: model(1) }, initialState(0), 1, settings);
    st = evaluate({ gpu, model: model(2) }, st, 2, settings);
    st = evaluate({ gpu, model: model(3) }, st, 3, settings);
    expect(st.decision.phase).toBe("serving");
    st = evaluate({ gpu, model: model(4), canaryMismatch: "a1: token 0" }, st, 4, settings);
    expect([st.decision.status, st.decision.weight, st.decision.reasons[0]?.code]).toEqual(["UNHEALTHY", 0, "CANARY_MISMATCH"]);
    st = evaluate({ gpu, model: model(5), canaryMismatch: null }, st, 5, settings);
    expect(st.decision.reasons[0]?.code).toBe("RECOVERING");
  });
});

describe("learning the expectation from the fleet", () => {
  const node = (nodeId: string, az: string, a: CanaryAnswer, model = "m@r1"): NodeAnswers => ({ nodeId, az, model, at: 0, answers: { a1: a } });
  const WRONG = ans([" x", " y", " z", " w"]);

  it("a strict majority of at least two nodes; a NaN answer has no vote", () => {
    expect(fleetMajority([node("n1", "a", RIGHT), node("n2", "b", RIGHT), node("n3", "a", WRONG)], TOL).a1).toEqual(RIGHT);
    expect(fleetMajority([node("n1", "a", RIGHT), node("n2", "b", WRONG)], TOL).a1).toBeUndefined();
    expect(fleetMajority([node("n1", "a", RIGHT)], TOL).a1).toBeUndefined();
    expect(fleetMajority([node("n1", "a", RIGHT), node("n2", "b", RIGHT), node("n3", "a", ans([" a", " b", " c", " d"], [Number.NaN, 0, 0, 0]))], TOL).a1).toEqual(RIGHT);
  });
  it("two revisions in a rollout are two expectations; a learned one stays when a node goes bad", () => {
    const first = learnExpectations([node("n1", "a", RIGHT), node("n2", "b", RIGHT), node("n3", "a", WRONG, "m@r2"), node("n4", "b", WRONG, "m@r2")], {}, {}, TOL, 5);
    expect(Object.keys(first).sort()).toEqual(["m@r1", "m@r2"]);
    expect(first["m@r2"].answers.a1).toEqual(WRONG);
    // n2 goes bad: 1 of 2 nodes of r1 — no majority now, but the learned expectation stays and n2 differs.
    const next = learnExpectations([node("n1", "a", RIGHT), node("n2", "b", WRONG)], first, {}, TOL, 10);
    expect(next["m@r1"]).toMatchObject({ answers: { a1: RIGHT }, disagreeing: ["n2"], capped: false, at: 5 });
  });
  it("most of the fleet disagreeing with the expectation caps it (a model change, not bad GPUs); an operator's record wins", () => {
    const prev = learnExpectations([node("n1", "a", RIGHT), node("n2", "b", RIGHT), node("n3", "c", RIGHT)], {}, {}, TOL, 1);
    const changed = learnExpectations([node("n1", "a", WRONG), node("n2", "b", WRONG), node("n3", "c", RIGHT)], prev, {}, TOL, 2);
    expect(changed["m@r1"]).toMatchObject({ capped: true, agreeing: 1 });
    const rec = { "m@r1": { source: "operator" as const, at: 3, answers: { a1: WRONG }, nodes: 0, agreeing: 0, disagreeing: [], capped: false } };
    const recorded = learnExpectations([node("n1", "a", WRONG), node("n2", "b", WRONG), node("n3", "c", RIGHT)], prev, rec, TOL, 4);
    expect(recorded["m@r1"]).toMatchObject({ source: "operator", capped: false, disagreeing: ["n3"] });
  });
});
