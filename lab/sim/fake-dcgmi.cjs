#!/usr/bin/env node
// Stand-in for DCGM's `dcgmi` on machines without NVIDIA GPUs (tests, `npm run drill`): answers
// `dcgmi diag -r 1 -j` (also `--run 1 --json`) only, the deep check's quick diagnostic.
//
// Its JSON follows NVIDIA's documentation and the diag schema in the DCGM repository
// (testing/python3/dcgm_diag_schema.json, DCGM 4), NOT a capture from a real node: no machine
// here has a GPU to record one on. Level 1 runs the `software` deployment checks, one result per GPU.
//
// Steered by the same state file as fake-nvidia-smi.cjs (FAKE_DCGMI_STATE, baked into the wrapper
// that nvsmi-state.ts writes), read on every call:
//   diagFail: {test, gpu, message?}  that test fails on that GPU (slot index);
//   diagDelayMs                      how long the diag takes (default 1000 ms: "seconds" on a real node);
//   exitCode (nvidia-smi failing: driver gone, GPU lost)  the software test fails on GPU 0 with
//                                    nvidia-smi's error text, as DCGM cannot reach the GPU either.
"use strict";

const fs = require("node:fs");

const USAGE = "Usage: dcgmi diag -r 1 -j (the only command this fake knows)\n";

function readState(file) {
  if (!file) return {};
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (err) {
    if (err && err.code === "ENOENT") return {};
    throw err;
  }
}

function isQuickDiag(argv) {
  if (argv[0] !== "diag") return false;
  let level = null;
  let json = false;
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-r" || a === "--run") level = argv[++i];
    else if (a.startsWith("--run=")) level = a.slice(6);
    else if (a === "-j" || a === "--json") json = true;
    else return false;
  }
  return json && (level === "1" || level === "quick" || level === "short");
}

function result(state) {
  const count = state.gpuCount ?? 8;
  const missing = new Set(state.missingGpus || []);
  const gpus = [];
  for (let i = 0; i < count; i++) if (!missing.has(i)) gpus.push(gpus.length);
  let fail = state.diagFail || null;
  if (!fail && state.exitCode) fail = { test: "software", gpu: 0, message: String(state.stderr || "the GPU cannot be reached").split("\n")[0] };
  const tests = [{ name: "software", results: [] }];
  if (fail && fail.test !== "software") tests.push({ name: fail.test, results: [] });
  for (const t of tests) {
    for (const g of gpus) {
      const failed = fail && fail.test === t.name && fail.gpu === g;
      const r = { entity_group: "GPU", entity_group_id: 1, entity_id: g, status: failed ? "Fail" : "Pass" };
      // error_id 0 with category/severity of an unknown error: the fake does not pretend to know DCGM's code.
      if (failed) r.warnings = [{ error_category: 15, error_id: 0, error_severity: 3, warning: fail.message || `${t.name} check failed on GPU ${g}` }];
      t.results.push(r);
    }
    t.test_summary = { status: t.results.some((r) => r.status === "Fail") ? "Fail" : "Pass" };
  }
  const doc = {
    "DCGM Diagnostic": { test_categories: [{ category: "Deployment", tests }] },
    entity_groups: [{ entity_group: "GPU", entity_group_id: 1, entities: gpus.map((g) => ({ entity_id: g, device_id: "2330", serial_num: String(1650000000000 + g) })) }],
    metadata: { version: "4.2.3", "Driver Version Detected": "590.48.01" },
  };
  return { code: fail ? 1 : 0, stdout: JSON.stringify(doc, null, 2) + "\n" };
}

function main() {
  let state;
  try {
    state = readState(process.env.FAKE_DCGMI_STATE || "");
  } catch (err) {
    process.stderr.write(`fake-dcgmi: cannot read FAKE_DCGMI_STATE: ${err && err.message}\n`);
    process.exitCode = 255;
    return;
  }
  const argv = process.argv.slice(2);
  if (!isQuickDiag(argv)) {
    process.stderr.write(USAGE);
    process.exitCode = 2;
    return;
  }
  setTimeout(() => {
    const r = result(state);
    process.stdout.write(r.stdout);
    process.exitCode = r.code;
  }, state.diagDelayMs ?? 1000);
}

main();
