/**
 * The HTML drill report as a person sees it: the page opened in a real headless Chromium
 * (Debian's `chromium`, installed by scripts/system-deps.sh with LLMHA_WITH_PROMTOOL=1), which
 * renders every panel; a script added to a copy of the page reads back what was drawn — one
 * panel per scenario with its verdict first, the targets' lines and labels, the failed
 * requests' reasons, the sleeping standby in grey (never as an error) — and a screenshot is taken.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { renderHtmlReport } from "../../lab/drill/html-report";
import { renderTable, summarize } from "../../lab/drill/report";
import { SCENARIOS } from "../../lab/drill/scenarios";
import { blank, type RunResult } from "../../lab/drill/scenarios/runner";
import { STATUS_COLORS } from "../../lab/drill/svg";
import { emptyTimeline, type Sample } from "../../lab/drill/timeline";

const CHROMIUM = ["chromium", "chromium-browser"].find((b) => spawnSync("which", [b]).status === 0);
const dir = mkdtempSync(join(tmpdir(), "llmha-html-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** 30 s of a drill: a1 crashes at 5 s (its L1 row out at 5.3 s), az-a's proxy loses a1 again at 17 s; c1 is the standby, asleep. */
function drill() {
  const tl = emptyTimeline();
  for (let t = 0; t <= 30_000; t += 100) {
    const down = (t >= 5000 && t < 9000) || (t >= 17_000 && t < 24_000);
    const l1Down = (t >= 5300 && t < 9000) || (t >= 17_000 && t < 24_000);
    const s: Sample = {
      t,
      nodes: { a1: { status: down ? "UNREACHABLE" : "HEALTHY", weight: down ? 0 : 100 }, b1: { status: "HEALTHY", weight: 100 }, c1: { status: "ERR", weight: 0 } },
      l1: { "p-a/a1": { status: l1Down ? "DOWN" : "UP", weight: l1Down ? 0 : 100, total: 0 }, "p-b/b1": { status: "UP", weight: 100, total: 0 } },
      dns: ["127.0.0.2", "127.0.0.3"],
    };
    tl.samples.push(s);
  }
  tl.fleet.push({ t: 0, azState: { "az-a": "OK", "az-b": "OK" }, tier: "L0", tokens: {}, standbyWake: false, suspect: "" });
  // From 20 s the leader wants the standby awake: out of DNS then is a fault to see, not its sleep.
  tl.fleet.push({ t: 20_000, azState: { "az-a": "DEGRADED", "az-b": "OK" }, tier: "L2", tokens: {}, standbyWake: true, suspect: "" });
  tl.sent = { main: 3000 };
  tl.marks.push({ t: 5000, label: "crash a1", kind: "inject" }, { t: 9000, label: "heal", kind: "heal" }, { t: 17_000, label: "crash a1", kind: "inject" });
  tl.failures.push({ t: 5100, client: "main", why: "ECONNRESET" }, { t: 5150, client: "main", why: "ECONNRESET" }, { t: 17_200, client: "main", why: "HTTP 503" });
  const crash = SCENARIOS.find((s) => s.name === "crash")!;
  const ok: RunResult = { ...blank("crash", 1), victims: ["a1"], injectAt: 5000, healAt: 9000, endAt: 12_000, detectMs: 80, l1Ms: 300, recoveryMs: 2000, failed: 2, extra: { failedBeyondInFlight: 0 } };
  const late: RunResult = { ...blank("crash", 1), victims: ["a1"], injectAt: 17_000, healAt: 24_000, endAt: 29_000, detectMs: 90, l1Ms: null, recoveryMs: null, failed: 1 };
  const summaries = [
    { ...summarize(crash, [ok]), runs_detail: [ok] },
    { ...summarize({ ...crash, name: "crash-late" }, [late]), runs_detail: [late] },
  ];
  const svg = {
    nodes: [{ id: "a1", az: "az-a", proxy: "p-a" }, { id: "b1", az: "az-b", proxy: "p-b" }, { id: "c1", az: "az-c", proxy: "p-c" }],
    azs: [{ name: "az-a", address: "127.0.0.2", standby: false }, { name: "az-b", address: "127.0.0.3", standby: false }, { name: "az-c", address: "127.0.0.4", standby: true }],
  };
  return renderHtmlReport(tl, { title: "llm-ha drill test", scenarios: summaries, table: renderTable(summaries), svg });
}

/** Reads back from the rendered page what a person sees, as JSON in a <pre id="seen">. */
const PROBE = `<script>
const seen = [...document.querySelectorAll("section.scenario")].map((s) => {
  const svg = s.querySelector("svg");
  const box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
  const fill = (c) => [...s.querySelectorAll("rect")].filter((r) => r.getAttribute("fill") === c && !r.classList.contains("legend") && r.getBoundingClientRect().width > 0).length;
  return {
    heading: s.querySelector("h2").innerText,
    width: box.width,
    height: box.height,
    targets: [...s.querySelectorAll("g.target text")].map((t) => t.textContent),
    reasons: [...s.querySelectorAll("text.reason")].map((t) => t.textContent),
    grey: fill("${STATUS_COLORS.ASLEEP}"),
    err: fill("${STATUS_COLORS.ERR}"),
    out: [...s.querySelectorAll("rect title")].filter((t) => /^az-c DNS \\(standby\\): OUT/.test(t.textContent)).length,
    labels: [...s.querySelectorAll("svg text")].map((t) => t.textContent),
  };
});
const pre = document.createElement("pre");
pre.id = "seen";
pre.textContent = JSON.stringify(seen);
document.body.appendChild(pre);
</script>`;

describe("the HTML drill report", () => {
  it.skipIf(!CHROMIUM)("renders in headless Chromium: one panel per scenario, verdict first, targets, failure reasons, the standby grey", () => {
    const html = drill();
    const page = join(dir, "report.html");
    writeFileSync(page, html.replace("</body>", `${PROBE}</body>`));
    const args = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,2400", "--virtual-time-budget=2000"];
    const dom = spawnSync(CHROMIUM!, [...args, "--dump-dom", `file://${page}`], { encoding: "utf8", timeout: 90_000 });
    expect(dom.status, dom.stderr).toBe(0);
    const m = /<pre id="seen">([\s\S]*?)<\/pre>/.exec(dom.stdout);
    expect(m, dom.stdout.slice(0, 500)).not.toBeNull();
    const seen = JSON.parse(m![1].replace(/&quot;/g, '"').replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&")) as { heading: string; width: number; height: number; targets: string[]; reasons: string[]; grey: number; err: number; out: number; labels: string[] }[];
    expect(seen).toHaveLength(2);
    const [ok, late] = seen;
    expect(ok.heading).toMatch(/^ok\s+crash\b/);
    expect(late.heading).toMatch(/^MISS\s+crash-late\b/);
    for (const p of seen) {
      expect(p.width).toBeGreaterThan(600);
      expect(p.height).toBeGreaterThan(200);
      // The standby node is asleep, in grey, never drawn as an error.
      expect(p.grey).toBeGreaterThan(0);
      expect(p.err).toBe(0);
      expect(p.labels).toContain("ASLEEP");
    }
    expect(ok.targets).toContain("L1 ≤ 1.2s (0.30s)");
    expect(late.targets).toContain("L1 ≤ 1.2s (never)");
    expect(ok.out).toBe(0);
    expect(late.out).toBeGreaterThan(0);
    expect(ok.reasons).toEqual(["ECONNRESET"]);
    expect(late.reasons).toEqual(["HTTP 503"]);
    // Each panel is its own stretch of the run: the first crash's panel does not hold the second's failure.
    expect(ok.labels.join(" ")).not.toContain("HTTP 503");

    const shot = join(dir, "report.png");
    const png = spawnSync(CHROMIUM!, [...args, `--screenshot=${shot}`, `file://${page}`], { encoding: "utf8", timeout: 90_000 });
    expect(png.status, png.stderr).toBe(0);
    expect(readFileSync(shot).subarray(1, 4).toString()).toBe("PNG");
    expect(statSync(shot).size).toBeGreaterThan(20_000);
  }, 200_000);
});
