/**
 * The planned-drain protocol between an inference pod and its node's agent (a planned
 * move cuts nothing). The inference container's preStop hook writes `DRAIN_FILE`
 * (a hostPath both pods mount); the agent answers `drain` / 503 while it exists
 * (`PLANNED_DRAIN`); the hook waits until the server holds no request, then the kubelet sends
 * SIGTERM; the next inference pod's init container removes the file. infra renders these
 * commands into the manifests; the drill runs the same script before it stops a server.
 */
import { DEFAULT_HAPROXY_TUNING } from "./haproxy-tuning";
import { PORTS } from "./names";

/** Node directory of the drain file (a hostPath: read-write in the inference pod, read-only in the agent). */
export const DRAIN_DIR = "/run/llm-ha";
export const DRAIN_FILE = `${DRAIN_DIR}/drain`;

/** Seconds the preStop hook leaves the node's agent and HAProxy to see the drain file before it counts in-flight requests. */
export const DRAIN_SETTLE_S = 3;
/**
 * The longest a planned stop waits for the requests in flight: HAProxy's `timeout server`
 * (the longest answer the proxy lets a server take), so no answer the proxy would let
 * finish is cut by a rolling update.
 */
export const DRAIN_MAX_S = Math.ceil(DEFAULT_HAPROXY_TUNING.timeoutServerMs / 1000);
/** Grace for a terminating inference pod: the drain, then vLLM's own shutdown. */
export const INFERENCE_TERMINATION_GRACE_S = DRAIN_MAX_S + 30;

/**
 * The inference container's preStop hook (a planned move cuts nothing): write the
 * drain file — the node's agent answers `drain` while it exists, so HAProxy sends no new
 * request — wait `settleS`, then until the server holds no request (vLLM's
 * `num_requests_running` + `num_requests_waiting` on its own `/metrics`; a server that no
 * longer answers holds none) or `limitS` passed. Only then does the kubelet send SIGTERM.
 * Python is in every vLLM image. The drill runs this same script before it stops a server.
 */
export function preStopCommand(drainFile: string = DRAIN_FILE, metricsUrl = `http://127.0.0.1:${PORTS.inference}/metrics`, settleS = DRAIN_SETTLE_S, limitS = DRAIN_MAX_S): string[] {
  const script = [
    "import sys, time, urllib.request as r",
    "path, url, settle, limit = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])",
    "start = time.time()",
    "with open(path, 'w') as f:",
    "    f.write('inference server stopping\\n')",
    "time.sleep(settle)",
    "while time.time() - start < limit:",
    "    try:",
    "        text = r.urlopen(url, timeout=2).read().decode()",
    "    except Exception:",
    "        break",
    "    busy = sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(('vllm:num_requests_running', 'vllm:num_requests_waiting')))",
    "    if busy == 0:",
    "        break",
    "    time.sleep(0.5)",
  ].join("\n");
  return ["python3", "-c", script, drainFile, metricsUrl, String(settleS), String(limitS)];
}

/** The init container's command: a new inference pod removes a drain file its predecessor left. */
export function clearDrainCommand(drainFile: string = DRAIN_FILE): string[] {
  return ["python3", "-c", "import os, sys\ntry:\n    os.remove(sys.argv[1])\nexcept FileNotFoundError:\n    pass", drainFile];
}
