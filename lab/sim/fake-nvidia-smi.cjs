#!/usr/bin/env node
// Stand-in for `nvidia-smi` on machines without NVIDIA GPUs (tests, `npm run drill`).
// Plain CommonJS with no dependencies: the agent runs it every second per node, so it must
// start as fast as node itself. Values come from real captures (see fixtures/README.md);
// faults are injected through a JSON state file read on every call.
//
// `-lms N` (or `--loop-ms=N`, `-l S`): the agent's long-lived stream. One batch (a row per GPU) every
// N ms until killed, re-reading the state file whenever it changes, so faults show as they are
// injected: `hangMs` prints nothing while it is set (nvidia-smi stuck), `exitCode` prints its text
// and ends the stream with that code (15: GPU lost), `missingGpus` drops rows from the next batch,
// overrides (ECC, …) change the next batch. It ends by itself when the agent that started it is
// gone (its pipe closed, or its parent changed), so a killed agent leaves no stream behind.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

/**
 * The state file named by FAKE_NVSMI_STATE; a missing file means all defaults.
 * Mirrored by the `NvsmiState` type in nvsmi-state.ts.
 * @typedef {object} NvsmiState
 * @property {number} [gpuCount] GPUs on the node (default 8); slots 0..7 use the 8×H100 capture's identities.
 * @property {"idle"|"load"} [profile] which captured row every GPU reports (default "idle").
 * @property {Record<string, Record<string, string>>} [overrides] per physical slot ("0".."N-1") or "*":
 *   field (name or alias) → value, written as nvidia-smi prints it with units ("0 MiB") or bare ("0").
 * @property {number} [exitCode] exit with this code after printing `stdout`/`stderr` instead of answering.
 * @property {string} [stdout] text printed with `exitCode`.
 * @property {string} [stderr] text printed with `exitCode`.
 * @property {number} [hangMs] sleep this long before doing anything else (nvidia-smi stuck in D state).
 * @property {boolean} [garbage] print non-CSV junk and exit 0.
 * @property {number[]} [missingGpus] physical slots that have fallen off the bus: absent from every listing,
 *   and the remaining GPUs are renumbered 0..n-1 as NVML does.
 */

const FIXTURES = path.join(__dirname, "fixtures");
const DEFAULT_GPU_COUNT = 8;
// nvidia-smi's own answer to any argument combination it does not understand.
const USAGE_ERROR = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n";
// From the 590.48.01 capture's `nvidia-smi --version`.
const VERSION_TEXT =
  "NVIDIA-SMI version  : 590.48.01\nNVML version        : 590.48\nDRIVER version      : 590.48.01\nCUDA Version        : 13.1\n";

/** @param {string} file @returns {NvsmiState} */
/** The version of the state read last (the wrapper's cache key: the first 16 hex digits of its SHA-1), null when none. */
let stateVersion = null;

function readState(file) {
  if (!file) return {};
  let text;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    if (err && err.code === "ENOENT") return {};
    throw err;
  }
  stateVersion = require("node:crypto").createHash("sha1").update(text).digest("hex").slice(0, 16);
  return JSON.parse(text);
}

/**
 * One captured query-gpu section: canonical field → { unit, value } (value as printed with units).
 * @param {"idle"|"load"} profile
 */
const profiles = new Map();
function readProfile(profile) {
  if (profiles.has(profile)) return profiles.get(profile);
  const [header, row] = fs.readFileSync(path.join(FIXTURES, `h100-query-gpu-${profile}.csv`), "utf8").split("\n");
  const names = header.split(", ");
  const values = row.split(", ");
  /** @type {Map<string, {unit: string, value: string}>} */
  const columns = new Map();
  names.forEach((h, i) => {
    const m = /^(.*) \[([^\]]+)\]$/.exec(h);
    columns.set(m ? m[1] : h, { unit: m ? m[2] : "", value: values[i] });
  });
  profiles.set(profile, columns);
  return columns;
}

let knownIdentities = null;
let aliasTable = null;
function aliases() {
  if (!aliasTable) aliasTable = JSON.parse(fs.readFileSync(path.join(FIXTURES, "h100-query-gpu-aliases.json"), "utf8"));
  return aliasTable;
}

/** Physical identities for `count` GPUs: the 8×H100 capture's, then made-up ones past slot 7. */
function identities(count) {
  if (!knownIdentities) knownIdentities = JSON.parse(fs.readFileSync(path.join(FIXTURES, "h100x8-gpus.json"), "utf8"));
  const known = knownIdentities;
  const out = [];
  for (let i = 0; i < count; i++) {
    const hex = (0x10 + i).toString(16).toUpperCase().padStart(2, "0");
    out.push(
      known[i] || {
        uuid: `GPU-00000000-0000-0000-0000-${String(i).padStart(12, "0")}`,
        busId: `00000000:${hex}:00.0`,
        serial: String(1650000000000 + i),
      },
    );
  }
  return out;
}

function timestamp(d) {
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return (
    `${d.getFullYear()}/${p(d.getMonth() + 1)}/${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`
  );
}

/**
 * nvidia-smi prints a unit only after a number; markers such as `[N/A]` stand alone.
 * Accepts a value given with or without its unit.
 */
function render(value, unit, nounits) {
  const bare = unit && value.endsWith(` ${unit}`) ? value.slice(0, -unit.length - 1) : value;
  if (nounits || !unit || !/^-?\d/.test(bare)) return bare;
  return `${bare} ${unit}`;
}

/** The GPUs present, in NVML order, each with its per-GPU and overridden fields. */
function gpus(state) {
  const count = state.gpuCount ?? DEFAULT_GPU_COUNT;
  const missing = new Set(state.missingGpus || []);
  const present = identities(count)
    .map((id, slot) => ({ ...id, slot }))
    .filter((g) => !missing.has(g.slot));
  return present.map((g, index) => {
    const [domain, bus, devFn] = g.busId.split(":");
    /** @type {Record<string, string>} */
    const fields = {
      index: String(index),
      uuid: g.uuid,
      serial: g.serial,
      "pci.bus_id": g.busId,
      "pci.domain": `0x${domain.slice(-4)}`,
      "pci.bus": `0x${bus}`,
      "pci.device": `0x${devFn.split(".")[0]}`,
      count: String(present.length),
    };
    const overrides = state.overrides || {};
    return { ...g, fields: { ...fields, ...overrides["*"], ...overrides[String(g.slot)] } };
  });
}

function parseArgs(argv) {
  /** @type {{query?: string, format?: string, list?: boolean, version?: boolean, id?: string, loopMs?: number}} */
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf("=");
    const key = eq >= 0 ? a.slice(0, eq) : a;
    const val = () => (eq >= 0 ? a.slice(eq + 1) : argv[++i]);
    if (key === "--query-gpu") o.query = val();
    else if (key === "--format") o.format = val();
    else if (key === "-i" || key === "--id") o.id = val();
    else if (key === "-L" || key === "--list-gpus") o.list = true;
    else if (key === "--version") o.version = true;
    else if (key === "-lms" || key === "--loop-ms" || key === "-l" || key === "--loop") {
      const n = Number(val());
      if (!Number.isInteger(n) || n <= 0) return null;
      o.loopMs = key === "-l" || key === "--loop" ? n * 1000 : n;
    } else return null;
  }
  return o;
}

/** @returns {{code: number, stdout?: string, stderr?: string}} */
function answer(argv, state) {
  if (state.garbage) {
    return { code: 0, stdout: "\u0000\u001b[?25l??\tNVRM: \u00ff\u00fe%%%%\nGPU\u0000 ;; ]]\n" };
  }
  if (state.exitCode !== undefined) {
    return { code: state.exitCode, stdout: state.stdout, stderr: state.stderr };
  }
  const args = parseArgs(argv);
  if (!args) return { code: 2, stdout: USAGE_ERROR };
  if (args.loopMs !== undefined && (args.list || args.version)) return { code: 2, stdout: USAGE_ERROR };
  if (args.version) return { code: 0, stdout: VERSION_TEXT };
  let list = gpus(state);
  if (args.id !== undefined) {
    const ids = args.id.split(",");
    list = list.filter((g) => ids.includes(g.fields.index) || ids.includes(g.uuid) || ids.includes(g.busId));
  }
  if (args.list) {
    const name = readProfile("idle").get("name").value;
    return { code: 0, stdout: list.map((g) => `GPU ${g.fields.index}: ${name} (UUID: ${g.uuid})\n`).join("") };
  }
  if (!args.query || !args.format) return { code: 2, stdout: USAGE_ERROR };
  const format = args.format.split(",");
  if (!format.includes("csv") || format.some((f) => !["csv", "noheader", "nounits"].includes(f))) {
    return { code: 2, stdout: USAGE_ERROR };
  }
  const columns = readProfile(state.profile || "idle");
  const table = aliases();
  const canonical = (f) => table[f] || f;
  const fields = args.query.split(",").map((f) => f.trim());
  for (const f of fields) {
    if (!columns.has(canonical(f))) return { code: 2, stderr: `Field "${f}" is not a valid field to query.\n\n` };
  }
  const nounits = format.includes("nounits");
  const lines = [];
  if (!format.includes("noheader")) {
    lines.push(
      fields
        .map((f) => {
          const { unit } = columns.get(canonical(f));
          return unit && !nounits ? `${canonical(f)} [${unit}]` : canonical(f);
        })
        .join(", "),
    );
  }
  const now = timestamp(new Date());
  for (const g of list) {
    const byCanonical = {};
    for (const [k, v] of Object.entries(g.fields)) byCanonical[canonical(k)] = v;
    lines.push(
      fields
        .map((f) => {
          const c = canonical(f);
          const { unit, value } = columns.get(c);
          if (c === "timestamp" && byCanonical[c] === undefined) return now;
          return render(byCanonical[c] ?? value, unit, nounits);
        })
        .join(", "),
    );
  }
  return { code: 0, stdout: lines.map((l) => `${l}\n`).join("") };
}

/** Writes the answer for the wrapper's fast path; the code file last (its presence says the rest is there). */
function saveAnswer(prefix, argv, r) {
  // The shell prints what it reads line by line: only answers of whole lines of plain text are
  // kept (the garbage fault's control bytes and carriage returns would not come back the same).
  const whole = (t) => !t || (t.endsWith("\n") && /^[\t\n\x20-\x7e]*$/.test(t));
  if (!whole(r.stdout) || !whole(r.stderr) || argv.some((a) => a.includes("\n"))) return;
  try {
    const put = (ext, text) => {
      const tmp = `${prefix}.${ext}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, text);
      fs.renameSync(tmp, `${prefix}.${ext}`);
    };
    put("out", r.stdout || "");
    put("err", r.stderr || "");
    put("args", `${argv.join(" ")}\n`);
    put("code", `${r.code}\n`);
  } catch {
    // A cache that cannot be written only costs speed.
  }
}

/**
 * The `-lms` stream: a batch every `periodMs` while the agent keeps it, the state re-read when its
 * file changes (a rename by writeNvsmiState gives a new inode). Nothing goes to the wrapper's cache.
 */
function stream(argv, file, periodMs) {
  const parent = process.ppid;
  let state = {};
  let seen = "";
  const load = () => {
    let key = "";
    try {
      const st = fs.statSync(file);
      key = `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch {
      key = "none";
    }
    if (key !== seen) {
      state = readState(key === "none" ? "" : file);
      seen = key;
    }
  };
  // The agent is gone: its end of the pipe is closed (EPIPE), or this process was handed to another parent.
  process.stdout.on("error", () => process.exit(0));
  const tick = () => {
    if (process.ppid !== parent) process.exit(0);
    try {
      load();
    } catch (err) {
      process.stderr.write(`fake-nvidia-smi: cannot read FAKE_NVSMI_STATE: ${err && err.message}\n`);
      process.exitCode = 255;
      return;
    }
    // Stuck (D state): nothing printed while the state says so; the agent kills it at its deadline.
    if (!state.hangMs) {
      const r = answer(argv, state);
      // One write per batch: the agent gets the batch's rows together.
      if (r.stdout) process.stdout.write(r.stdout);
      if (r.stderr) process.stderr.write(r.stderr);
      if (r.code !== 0) {
        process.exitCode = r.code;
        return;
      }
    }
    setTimeout(tick, periodMs);
  };
  tick();
}

function main() {
  const argv = process.argv.slice(2);
  const parsed = parseArgs(argv);
  if (parsed && parsed.loopMs !== undefined && parsed.query) {
    stream(argv, process.env.FAKE_NVSMI_STATE || "", parsed.loopMs);
    return;
  }
  let state;
  try {
    state = readState(process.env.FAKE_NVSMI_STATE || "");
  } catch (err) {
    process.stderr.write(`fake-nvidia-smi: cannot read FAKE_NVSMI_STATE: ${err && err.message}\n`);
    process.exitCode = 255;
    return;
  }
  const run = () => {
    const r = answer(argv, state);
    if (r.stdout) process.stdout.write(r.stdout);
    if (r.stderr) process.stderr.write(r.stderr);
    // exitCode rather than exit(): exit() can cut off output still queued for a pipe.
    process.exitCode = r.code;
    // The wrapper's cache (nvsmi-state.ts): the same state and arguments give the same answer,
    // except a hang (its delay is the point), a timestamp (it moves) and a stream (it never ends).
    const cache = process.env.FAKE_NVSMI_CACHE;
    if (cache && stateVersion === process.env.FAKE_NVSMI_VERSION && !state.hangMs && !argv.some((a) => a.includes("timestamp"))) saveAnswer(cache, argv, r);
  };
  if (state.hangMs) setTimeout(run, state.hangMs);
  else run();
}

main();
