import { writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** The fake nvidia-smi executable; point `LLMHA_NVIDIA_SMI` at it and `FAKE_NVSMI_STATE` at a state file. */
export const FAKE_NVIDIA_SMI_PATH = join(__dirname, "fake-nvidia-smi.cjs");

/** The fake dcgmi (`diag -r 1 -j` only), steered by the same state file. */
export const FAKE_DCGMI_PATH = join(__dirname, "fake-dcgmi.cjs");

/** Writes `path`, a script running the fake dcgmi with `statePath` baked in (the agent gives it a minimal environment). Returns `path`. */
export function writeFakeDcgmiWrapper(path: string, statePath: string): string {
  const q = (x: string): string => `'${x.replace(/'/g, "'\\''")}'`;
  writeFileSync(path, ["#!/bin/sh", `FAKE_DCGMI_STATE=${q(statePath)} exec ${q(FAKE_DCGMI_PATH)} "$@"`, ""].join("\n"), { mode: 0o755 });
  return path;
}

/**
 * Writes `path`, a script running the fake with `statePath` baked in: the agent gives nvidia-smi a
 * minimal environment (no `FAKE_NVSMI_STATE`), as it would give the real one. Returns `path`.
 *
 * Fast path: an answer the fake already rendered for the state's version (`<state>.ver`, the
 * hash of its content, written by `writeNvsmiState`) and the same arguments is printed by the
 * shell alone (`<state>.c/<version>-<length of the arguments>.{args,out,err,code}`; the stored
 * arguments must match), without starting node. Six agents asking twice a second each started
 * twelve node processes a second — most of a core on the drill's 2-core machine, and the fake's
 * own slowness under that load read as `GPU_QUERY_TIMEOUT`. A miss runs the fake, which fills
 * the cache when the state it read is that version.
 */
export function writeFakeNvidiaSmiWrapper(path: string, statePath: string): string {
  const q = (x: string): string => `'${x.replace(/'/g, "'\\''")}'`;
  writeFileSync(path, [
    "#!/bin/sh",
    `S=${q(statePath)}`,
    'if read -r v 2>/dev/null < "$S.ver"; then',
    '  a="$*"; f="$S.c/$v-${#a}"',
    '  if read -r c 2>/dev/null < "$f.code" && read -r b 2>/dev/null < "$f.args" && [ "$b" = "$a" ]; then',
    '    while IFS= read -r l; do printf \'%s\\n\' "$l"; done < "$f.out"',
    '    while IFS= read -r l; do printf \'%s\\n\' "$l" >&2; done < "$f.err"',
    '    exit "$c"',
    "  fi",
    '  export FAKE_NVSMI_CACHE="$f" FAKE_NVSMI_VERSION="$v"',
    "fi",
    `FAKE_NVSMI_STATE="$S" exec ${q(FAKE_NVIDIA_SMI_PATH)} "$@"`,
    "",
  ].join("\n"), { mode: 0o755 });
  return path;
}

/**
 * What the fake nvidia-smi answers, read from the file named by `FAKE_NVSMI_STATE` on every call.
 * A missing file means every default. Mirrors the JSDoc typedef in fake-nvidia-smi.cjs.
 */
export interface NvsmiState {
  /** GPUs on the node. Default 8; slots 0..7 carry the UUIDs and bus ids of a real 8×H100 node. */
  gpuCount?: number;
  /** Which captured H100 row every GPU reports. Default `"idle"`. */
  profile?: "idle" | "load";
  /**
   * Per physical slot (`"0"`..) or `"*"` for all: field name (or alias) → value, as nvidia-smi prints it
   * with units (`"0 MiB"`) or bare (`"0"`); markers such as `"[N/A]"` print verbatim. Default none.
   */
  overrides?: Record<string, Record<string, string>>;
  /** Print `stdout`/`stderr` and exit with this code instead of answering. Default none. */
  exitCode?: number;
  /** Text printed with `exitCode`. Default none. */
  stdout?: string;
  /** Text printed with `exitCode`. Default none. */
  stderr?: string;
  /** Sleep this long before answering, as nvidia-smi stuck in D state does. Default 0. */
  hangMs?: number;
  /** Print non-CSV junk and exit 0. Default false. */
  garbage?: boolean;
  /** Physical slots gone from the bus: absent from every listing; the rest are renumbered 0..n-1. Default none. */
  missingGpus?: number[];
  /** fake-dcgmi.cjs only: `dcgmi diag -r 1` fails this test on this GPU (index). Default none. */
  diagFail?: { test: string; gpu: number; message?: string };
  /** fake-dcgmi.cjs only: how long the diag takes. Default 1000 ms. */
  diagDelayMs?: number;
}

/** Real nvidia-smi error texts (see fixtures/README.md). */
const DRIVER_NOT_LOADED =
  "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n";
const GPU_LOST = "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU\n";
const DRIVER_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\n";

/** The GPU slot that the single-GPU faults below hit. */
export const FAULTED_GPU = 3;

/** One state per fault the agent must recognise; write one with `writeNvsmiState`. */
export const NVSMI_FAULTS = {
  driverNotLoaded: { exitCode: 9, stderr: DRIVER_NOT_LOADED },
  gpuLost: { exitCode: 15, stderr: GPU_LOST },
  driverMismatch: { exitCode: 18, stderr: DRIVER_MISMATCH },
  /** Far beyond any probe timeout: the agent must give up on it. */
  hang: { hangMs: 600_000 },
  garbage: { garbage: true },
  eccUncorrected: { overrides: { [FAULTED_GPU]: { "ecc.errors.uncorrected.volatile.total": "2" } } },
  rowRemapFailure: { overrides: { [FAULTED_GPU]: { "remapped_rows.failure": "Yes" } } },
  rowRemapPending: { overrides: { [FAULTED_GPU]: { "remapped_rows.pending": "Yes" } } },
  retiredPagesPending: { overrides: { [FAULTED_GPU]: { "retired_pages.pending": "Yes" } } },
  recoveryAction: { overrides: { [FAULTED_GPU]: { gpu_recovery_action: "Reset" } } },
  thermal: {
    overrides: {
      [FAULTED_GPU]: {
        "clocks_event_reasons.hw_thermal_slowdown": "Active",
        "clocks_event_reasons.active": "0x0000000000000040",
      },
    },
  },
  gpuMissing: { missingGpus: [FAULTED_GPU] },
  /** DCGM's quick diagnostic fails on one GPU (nvidia-smi still answers clean): the deep check's `GPU_DIAG_FAILED`. */
  diagFail: { diagFail: { test: "software", gpu: FAULTED_GPU, message: "Page retirement: pending page retirements on GPU 3" } },
  /**
   * NVSwitch systems (fields and values from the H100 capture's `fabric.*` columns and the `-q`
   * Fabric section): Fabric Manager has not registered the GPU (FM down at boot, NVSentinel#883),
   * or registered it with an error.
   */
  fabricNotRegistered: { overrides: { [FAULTED_GPU]: { "fabric.state": "In Progress", "fabric.status": "N/A" } } },
  fabricError: { overrides: { [FAULTED_GPU]: { "fabric.state": "Completed", "fabric.status": "Fabric Manager error" } } },
  /** Utilization is not reported for GPUs in MIG mode. */
  migNA: { overrides: { "*": { "utilization.gpu": "[N/A]", "mig.mode.current": "Enabled" } } },
  unknownError: { overrides: { [FAULTED_GPU]: { "temperature.gpu": "[Unknown Error]" } } },
} satisfies Record<string, NvsmiState>;

export type NvsmiFault = keyof typeof NVSMI_FAULTS;

/**
 * Corrected ECC errors (single-bit, fixed by ECC: the GPU serves on) on the faulted GPU: write
 * states with a rising `count` to show memory wearing out, what the repair ladder's predictive
 * drain watches. Other GPUs keep the capture's 0.
 */
export function eccCorrected(count: number, base: NvsmiState = {}): NvsmiState {
  const overrides = { ...base.overrides };
  overrides[FAULTED_GPU] = { ...overrides[FAULTED_GPU], "ecc.errors.corrected.volatile.total": String(count) };
  return { ...base, overrides };
}

let tmpSeq = 0;

/**
 * Writes the state atomically (temp file + rename) so a concurrent nvidia-smi call never reads
 * half a file, then its version (the content's hash) for the wrapper's cache: state first, so a
 * call that reads the new version always finds the new state.
 */
export async function writeNvsmiState(path: string, state: NvsmiState): Promise<void> {
  const text = JSON.stringify(state);
  const put = async (file: string, content: string): Promise<void> => {
    const tmp = `${file}.${process.pid}.${tmpSeq++}.tmp`;
    await writeFile(tmp, content);
    await rename(tmp, file);
  };
  await put(path, text);
  await mkdir(`${path}.c`, { recursive: true });
  await put(`${path}.ver`, `${createHash("sha1").update(text).digest("hex").slice(0, 16)}\n`);
}

/**
 * What a reboot of the node leaves of a state: a GPU off the bus or lost (XID 79's kin: "Reboot
 * the system to recover this GPU") is back, a pending row remap is applied (the rows remapped:
 * no longer pending), the driver's recovery action is done; a row-remap failure (no spare rows
 * left) and anything else stay — a reboot does not heal them.
 */
export function afterReboot(state: NvsmiState): NvsmiState {
  const out: NvsmiState = { ...state };
  delete out.missingGpus;
  if (state.exitCode === NVSMI_FAULTS.gpuLost.exitCode && state.stderr === NVSMI_FAULTS.gpuLost.stderr) {
    delete out.exitCode;
    delete out.stderr;
    delete out.stdout;
  }
  if (state.overrides) {
    const overrides: Record<string, Record<string, string>> = {};
    for (const [slot, fields] of Object.entries(state.overrides)) {
      const kept = Object.fromEntries(Object.entries(fields).filter(([k]) => k !== "remapped_rows.pending" && k !== "gpu_recovery_action"));
      if (Object.keys(kept).length) overrides[slot] = kept;
    }
    if (Object.keys(overrides).length) out.overrides = overrides;
    else delete out.overrides;
  }
  return out;
}
