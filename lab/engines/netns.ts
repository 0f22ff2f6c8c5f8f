/**
 * The drill's own network: as root the drill re-executes itself under
 * `unshare -n`, a network namespace with nothing but its own loopback, and cuts links between
 * two of its loopback addresses with `iptables` rules inside it (removed on heal). Nothing it
 * does reaches the host's network namespace: every rule is refused unless this process runs in
 * a namespace other than init's, and the namespace (rules included) vanishes with the drill.
 * Without root it runs on the host's loopback and the scenarios that need cuts are skipped.
 */
import { spawn, spawnSync } from "node:child_process";
import { readlinkSync } from "node:fs";

/** Set in the re-executed drill's environment to the namespace it came from (`net:[inode]`): the one it must not be in. Not `LLMHA_…`: the agents warn about any such name that is not a setting. */
export const NETNS_ENV = "DRILL_NETNS_FROM";

export class NetnsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NetnsError";
  }
}

function onPath(bin: string, args: string[]): boolean {
  const r = spawnSync(bin, args, { stdio: "ignore", timeout: 5000 });
  return !r.error;
}

/** Whether this machine lets the drill make a namespace of its own; if not, why (the line printed for skipped scenarios). */
export function netnsSupport(): { ok: true } | { ok: false; why: string } {
  if (process.platform !== "linux") return { ok: false, why: "network namespaces are Linux-only" };
  if (process.getuid?.() !== 0) return { ok: false, why: "not root: `unshare -n` (a network namespace of its own) and iptables need root" };
  if (!onPath("unshare", ["--version"])) return { ok: false, why: "`unshare` (util-linux) is not installed" };
  if (!onPath("ip", ["-V"])) return { ok: false, why: "`ip` (iproute2) is not installed" };
  if (!onPath("iptables", ["--version"])) return { ok: false, why: "`iptables` is not installed (apt-get install -y iptables)" };
  // Root is not enough in a container without CAP_SYS_ADMIN (a CI runner's): try it once.
  const probe = spawnSync("unshare", ["-n", "--", "sh", "-c", "ip link set lo up && iptables -L -n >/dev/null"], { stdio: "ignore", timeout: 10_000 });
  if (probe.status !== 0) return { ok: false, why: "`unshare -n` or iptables inside it is not permitted here (a container without CAP_SYS_ADMIN / CAP_NET_ADMIN?)" };
  return { ok: true };
}

/** The network namespace this process is in (`net:[inode]`), or null where /proc cannot tell. */
function netnsOf(pid: number | "self"): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return null;
  }
}

/** The value to put in `NETNS_ENV` for a command about to enter a new namespace: the one this process is in. */
export function netnsMark(): string {
  return netnsOf("self") ?? "unknown";
}

/**
 * True when this process runs in a namespace made for the drill: not the one it was started
 * from (the environment names it) nor init's (where /proc lets us read init's).
 */
export function inDrillNetns(): boolean {
  const from = process.env[NETNS_ENV];
  const self = netnsOf("self");
  if (!from || from === "unknown" || self === null || self === from) return false;
  const init = netnsOf(1);
  return init === null || init !== self;
}

/** The command line that runs `argv` in a new network namespace with its loopback up (set `NETNS_ENV` to `netnsMark()` in its environment). */
export function netnsCommand(argv: readonly string[]): [string, string[]] {
  return ["unshare", ["-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "llmha-netns", ...argv]];
}

/**
 * Runs this command again in a new network namespace with its loopback up, stdio inherited;
 * resolves its exit code. Ctrl-C reaches it through the terminal's process group as before.
 */
export function reexecInNetns(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [cmd, args] = netnsCommand(argv);
  const child = spawn(cmd, args, { stdio: "inherit", env: { ...env, [NETNS_ENV]: netnsMark() } });
  // A signal sent to this process alone (not to the terminal's group) reaches the drill too: it
  // is the same pid as the command (unshare and sh exec it), and it stops what it started. Once,
  // as SIGTERM: after a Ctrl-C the drill already has its SIGINT, and its SIGTERM handler joins the
  // same clean-up, where a second SIGINT would end it before the clean-up did.
  let forwarded = false;
  const forward = (): void => {
    if (forwarded) return;
    forwarded = true;
    child.kill("SIGTERM");
  };
  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM"];
  for (const s of signals) process.on(s, forward);
  return new Promise((resolve) => {
    const done = (code: number): void => {
      for (const s of signals) process.removeListener(s, forward);
      resolve(code);
    };
    child.on("error", () => done(2));
    child.on("exit", (code, signal) => done(code ?? (signal ? 130 : 1)));
  });
}

/** A link between two loopback addresses (or 127.x prefixes such as `127.1.1.0/24`), optionally one TCP port of `to`. */
export interface LinkSpec {
  from: string;
  to: string;
  /** Only traffic to this port of `to` (and its answers); absent: every port. */
  port?: number;
  /**
   * A share (0–1) of the new TCP connections from `from` to `to` refused (their SYN answered
   * with a reset: a dropped connection), the rest untouched; absent: every packet dropped both ways.
   */
  share?: number;
}

const ADDRESS = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}(\/(8|16|24|32))?$/;

/** The iptables arguments (after `-A`/`-D OUTPUT`) that drop one direction of a link. */
export function dropRules(l: LinkSpec): string[][] {
  for (const a of [l.from, l.to]) if (!ADDRESS.test(a)) throw new NetnsError(`link address ${JSON.stringify(a)} is not a loopback address (127.x.y.z)`);
  if (l.port !== undefined && !(Number.isInteger(l.port) && l.port > 0 && l.port < 65536)) throw new NetnsError(`link port ${l.port} is not a TCP port`);
  if (l.share !== undefined) {
    if (!(Number.isFinite(l.share) && l.share > 0 && l.share <= 1)) throw new NetnsError(`link loss share ${l.share}: must be above 0 and at most 1`);
    // Per SYN: a retransmitted SYN draws again, as on a lossy link; refused with a reset so the
    // client learns at once (HAProxy's `retries` then tries another server).
    return [["-s", l.from, "-d", l.to, "-p", "tcp", "--syn", ...(l.port ? ["--dport", String(l.port)] : []), "-m", "statistic", "--mode", "random", "--probability", String(l.share), "-j", "REJECT", "--reject-with", "tcp-reset"]];
  }
  // Both directions: on loopback every packet passes OUTPUT once, so one rule each way cuts the link
  // whichever side sends (a connect times out, an open connection's data is lost: a partition, not a reset).
  const there = ["-s", l.from, "-d", l.to, ...(l.port ? ["-p", "tcp", "--dport", String(l.port)] : []), "-j", "DROP"];
  const back = ["-s", l.to, "-d", l.from, ...(l.port ? ["-p", "tcp", "--sport", String(l.port)] : []), "-j", "DROP"];
  return [there, back];
}

const key = (l: LinkSpec): string => `${l.from}>${l.to}:${l.port ?? "*"}~${l.share ?? 1}`;

/**
 * Cuts and heals links inside the drill's namespace. Every rule it added is removed by
 * `healAll` (the drill's clean-up); the namespace takes whatever is left with it anyway.
 */
export class LinkCuts {
  private readonly active = new Map<string, LinkSpec>();
  constructor(private readonly iptables = "iptables") {
    if (!inDrillNetns()) throw new NetnsError("link cuts run only inside the drill's own network namespace (root: the drill re-executes itself under `unshare -n`)");
  }

  private run(op: "-A" | "-D", rule: string[]): void {
    const r = spawnSync(this.iptables, ["-w", op, "OUTPUT", ...rule], { encoding: "utf8", timeout: 10_000 });
    if (r.error || r.status !== 0) throw new NetnsError(`iptables ${op} OUTPUT ${rule.join(" ")} failed: ${r.error?.message ?? r.stderr.trim()}`);
  }

  /** Drops every packet between the two (both directions); a link already cut stays cut once. */
  cut(l: LinkSpec): void {
    if (this.active.has(key(l))) return;
    for (const rule of dropRules(l)) this.run("-A", rule);
    this.active.set(key(l), l);
  }

  heal(l: LinkSpec): void {
    if (!this.active.delete(key(l))) return;
    for (const rule of dropRules(l)) this.run("-D", rule);
  }

  /** Every link cut between any of `a` and any of `b` (an AZ from another, from Redis…). */
  cutBetween(a: readonly string[], b: readonly string[], o: { port?: number; share?: number } = {}): LinkSpec[] {
    const links = a.flatMap((from) => b.filter((to) => to !== from).map((to) => ({ from, to, ...o })));
    for (const l of links) this.cut(l);
    return links;
  }

  cuts(): LinkSpec[] {
    return [...this.active.values()];
  }

  healAll(): void {
    for (const l of [...this.active.values()]) this.heal(l);
  }
}
