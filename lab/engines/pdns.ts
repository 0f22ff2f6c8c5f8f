/**
 * A real PowerDNS authoritative server on loopback standing in for Route53 (L3): a bind
 * zone whose service name is a LUA `ifurlup` record over every AZ's `/az/health`, checked
 * once a second on each AZ's own loopback address. As the stack's weighted records
 * (`weighted`): each query answers one healthy AZ, chosen in proportion to its weight (each
 * address listed weight times, `selector='random'`); zero weights only when no weighted AZ is
 * healthy; every AZ, by weight, when none is (Route53's fail-open). Beside it,
 * plain A record sets (`records`) stand for Kubernetes headless Services: one name per AZ
 * listing its inference nodes, which the AZ proxies' `server-template` resolves; `setRecords`
 * changes one and reloads the zone (`pdns_control bind-reload-now`), as the endpoints
 * controller would when a pod comes or goes. The configuration is generated here;
 * `pdnsZoneText` and `pdnsConfigText` are pure.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";
import { Resolver } from "node:dns/promises";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, sleep } from "../../agent/src/util/net";
import { EngineMissingError, stopChild } from "./child";

const execFileAsync = promisify(execFile);

export class PdnsMissingError extends EngineMissingError {
  constructor(what: string) {
    super(what, "pdns-server pdns-backend-bind");
    this.name = "PdnsMissingError";
  }
}

export class PdnsStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PdnsStartError";
  }
}

export class PdnsConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PdnsConfigError";
  }
}

export interface PdnsZoneArgs {
  /** Zone apex. Default `llmha.test`. */
  zone?: string;
  /** Label of the service name inside the zone. Default `inference`. */
  service?: string;
  /**
   * Address groups in failover order: PowerDNS answers the healthy addresses of the first group that has
   * any (a group per role: the active AZs, then the standby AZ). Every address is one AZ's proxy.
   */
  groups?: string[][];
  /**
   * Instead of `groups`: Route53's weighted records, one per AZ proxy address with its
   * weight (its capacity). Each query answers one address (see the module comment).
   */
  weighted?: { address: string; weight: number }[];
  /** Port every AZ's proxy listens on for `/az/health`. */
  healthPort: number;
  /** Path checked. Default `/az/health`. */
  healthPath?: string;
  /** TTL of the answer in seconds. Default 1 (Route53 would be ≤ 30). */
  ttl?: number;
  /**
   * Plain A record sets: name inside the zone (e.g. `az-a.nodes`) → addresses. An empty
   * list leaves the name out (a Service with no endpoints: NXDOMAIN). Default none.
   */
  records?: Record<string, string[]>;
  /** SOA serial. Default 1. */
  serial?: number;
}

export interface PdnsArgs extends PdnsZoneArgs {
  /** UDP/TCP port on 127.0.0.1. Default: a free port. */
  port?: number;
  /** Path of the binary. Default `pdns_server` (or `$LLMHA_PDNS_SERVER`). */
  bin?: string;
  /** Seconds between `ifurlup` checks. Default 1. */
  checkIntervalS?: number;
  /** Start-up wait. Default 10000 ms. */
  startTimeoutMs?: number;
}

export interface PdnsHandle {
  readonly pid: number;
  readonly port: number;
  /** Fully qualified service name, e.g. `inference.llmha.test`. */
  readonly name: string;
  /**
   * A records of `name` (default the service name), sorted; throws on a DNS error. With
   * `weighted` the service name answers one address a query: this is then every address it may
   * answer now (the `ANSWERS_SUFFIX` name: the AZs DNS serves, as a crowd of resolvers sees them).
   */
  query(name?: string): Promise<string[]>;
  /** How many of `n` single queries of the service name answered each address (failed queries count under `error`). */
  sample(n: number): Promise<Record<string, number>>;
  /**
   * Replaces one A record set (see `PdnsZoneArgs.records`) and reloads the zone; resolves
   * once PowerDNS serves the new zone. Calls run one after the other.
   */
  setRecords(name: string, addresses: readonly string[]): Promise<void>;
  /** SIGTERM (then SIGKILL) and remove the folder. Idempotent. */
  stop(): Promise<void>;
}

/**
 * With `weighted`, the name (service name + this) that answers every address the service name
 * may answer now: `query()` reads it. Sampling the service name instead (24 single answers a
 * read) missed an AZ by chance often enough over a full drill's thousands of reads to count as
 * DNS changes, and cost PowerDNS 24 LUA answers a read.
 */
export const ANSWERS_SUFFIX = "-answers";

const IPV4_RE = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;
const LABEL_RE = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** `ifurlup`'s address groups and selector: the failover groups as given, or the weighted set. */
function luaGroups(a: PdnsZoneArgs): { groups: string[][]; selector: string } {
  if (a.weighted && a.groups) throw new PdnsConfigError("give either groups or weighted, not both");
  if (!a.weighted) return { groups: a.groups ?? [], selector: "all" };
  for (const w of a.weighted) if (!Number.isInteger(w.weight) || w.weight < 0 || w.weight > 255) throw new PdnsConfigError(`bad weight ${w.weight} for ${w.address}`);
  const on = a.weighted.filter((w) => w.weight > 0);
  const g = on.reduce((n, w) => gcd(n, w.weight), 0) || 1;
  const groups = [on.flatMap((w) => Array<string>(w.weight / g).fill(w.address)), a.weighted.filter((w) => w.weight === 0).map((w) => w.address)];
  return { groups: groups.filter((x) => x.length > 0), selector: "random" };
}

function resolved(a: PdnsZoneArgs): Required<Omit<PdnsZoneArgs, "groups" | "weighted">> & { groups: string[][]; selector: string } {
  return {
    zone: a.zone ?? "llmha.test",
    service: a.service ?? "inference",
    ...luaGroups(a),
    healthPort: a.healthPort,
    healthPath: a.healthPath ?? "/az/health",
    ttl: a.ttl ?? 1,
    records: a.records ?? {},
    serial: a.serial ?? 1,
  };
}

function checkIp(ip: string): void {
  if (!IPV4_RE.test(ip)) throw new PdnsConfigError(`not an IPv4 address: ${JSON.stringify(ip)}`);
}

/** The bind zone file: SOA, NS, and the LUA record. Throws `PdnsConfigError` on input PowerDNS would refuse. */
export function pdnsZoneText(args: PdnsZoneArgs): string {
  const a = resolved(args);
  for (const l of [...a.zone.split("."), a.service]) if (!LABEL_RE.test(l)) throw new PdnsConfigError(`bad DNS label ${JSON.stringify(l)}`);
  const all = a.groups.flat();
  if (all.length === 0 || a.groups.some((g) => g.length === 0)) throw new PdnsConfigError("every address group needs at least one address");
  for (const ip of all) checkIp(ip);
  if (!Number.isInteger(a.healthPort) || a.healthPort < 1 || a.healthPort > 65535) throw new PdnsConfigError(`bad health port ${a.healthPort}`);
  if (!a.healthPath.startsWith("/") || /['"\s\\]/.test(a.healthPath)) throw new PdnsConfigError(`bad health path ${JSON.stringify(a.healthPath)}`);
  const fqdn = `${a.service}.${a.zone}`;
  const groups = a.groups.map((g) => `{${g.map((ip) => `'${ip}'`).join(", ")}}`).join(", ");
  const lua = `ifurlup('http://${fqdn}:${a.healthPort}${a.healthPath}', {${groups}}, {selector='${a.selector}'})`;
  // Weighted: a second name answers every address the service name may answer now, all at once
  // (the same checks, selector 'all'): what DNS serves, read in one query, not guessed from samples.
  const unique = a.groups.map((g) => `{${[...new Set(g)].map((ip) => `'${ip}'`).join(", ")}}`).join(", ");
  const answers = a.selector === "random" ? [`${a.service}${ANSWERS_SUFFIX} ${a.ttl} IN LUA A "ifurlup('http://${fqdn}:${a.healthPort}${a.healthPath}', {${unique}}, {selector='all'})"`] : [];
  if (!Number.isInteger(a.serial) || a.serial < 1 || a.serial > 0xffffffff) throw new PdnsConfigError(`bad SOA serial ${a.serial}`);
  const sets: string[] = [];
  for (const [name, addresses] of Object.entries(a.records)) {
    if (name === a.service || name === `${a.service}${ANSWERS_SUFFIX}` || name === "ns1" || !name.split(".").every((l) => LABEL_RE.test(l))) throw new PdnsConfigError(`bad record name ${JSON.stringify(name)}`);
    for (const ip of addresses) {
      checkIp(ip);
      sets.push(`${name} ${a.ttl} IN A ${ip}`);
    }
  }
  return [
    `$ORIGIN ${a.zone}.`,
    `$TTL ${a.ttl}`,
    `@ IN SOA ns1.${a.zone}. hostmaster.${a.zone}. ${a.serial} 60 60 3600 ${a.ttl}`,
    `@ IN NS ns1.${a.zone}.`,
    `ns1 IN A 127.0.0.1`,
    `${a.service} ${a.ttl} IN LUA A "${lua}"`,
    ...answers,
    ...sets,
    "",
  ].join("\n");
}

/** `pdns.conf` for a foreground, unprivileged server with the bind backend and LUA records. */
export function pdnsConfigText(o: { dir: string; port: number; checkIntervalS?: number }): string {
  return [
    "launch=bind",
    `bind-config=${join(o.dir, "named.conf")}`,
    "enable-lua-records=yes",
    `lua-health-checks-interval=${o.checkIntervalS ?? 1}`,
    "security-poll-suffix=",
    "daemon=no",
    "guardian=no",
    "local-address=127.0.0.1",
    `local-port=${o.port}`,
    `socket-dir=${o.dir}`,
    "disable-syslog=yes",
    "loglevel=4",
    "webserver=no",
    // A changed record set (`setRecords`) is answered at once: nothing cached.
    "cache-ttl=0",
    "query-cache-ttl=0",
    "negquery-cache-ttl=0",
    "",
  ].join("\n");
}

/** Whether `bin` can be run: only "no such file" means missing (on a loaded host `--version` can outlast its time limit). */
function exists(bin: string): boolean {
  const err = spawnSync(bin, ["--version"], { stdio: "ignore", timeout: 5000 }).error as NodeJS.ErrnoException | undefined;
  return !err || err.code !== "ENOENT";
}

/** Starts pdns_server and waits until the service name answers. */
export async function startPdns(args: PdnsArgs): Promise<PdnsHandle> {
  const bin = args.bin ?? process.env.LLMHA_PDNS_SERVER ?? "pdns_server";
  if (!exists(bin)) throw new PdnsMissingError(bin);
  const a = resolved(args);
  const zoneText = pdnsZoneText(args);
  const dir = mkdtempSync(join(tmpdir(), "llmha-pdns-"));
  const port = args.port ?? (await freePort());
  writeFileSync(join(dir, "zone.db"), zoneText);
  writeFileSync(join(dir, "named.conf"), `zone "${a.zone}" { type master; file "${join(dir, "zone.db")}"; };\n`);
  writeFileSync(join(dir, "pdns.conf"), pdnsConfigText({ dir, port, checkIntervalS: args.checkIntervalS }));
  let child: ChildProcess;
  let out = "";
  let exited = false;
  try {
    child = spawn(bin, [`--config-dir=${dir}`], { stdio: ["ignore", "pipe", "pipe"] });
  } catch {
    rmSync(dir, { recursive: true, force: true });
    throw new PdnsMissingError(bin);
  }
  const keep = (d: Buffer): void => {
    if (out.length < 20_000) out += d.toString("utf8");
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  child.once("exit", () => (exited = true));
  const name = `${a.service}.${a.zone}`;
  const resolver = (): Resolver => {
    const r = new Resolver({ timeout: 500, tries: 1 });
    r.setServers([`127.0.0.1:${port}`]);
    return r;
  };
  const once = async (n: string): Promise<string[]> => (await resolver().resolve4(n)).sort();
  const query = async (n = name): Promise<string[]> => (args.weighted && n === name ? once(name.replace(/^([^.]+)\./, `$1${ANSWERS_SUFFIX}.`)) : once(n));
  const sample = async (count: number): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (let i = 0; i < count; i += 20) {
      const batch = await Promise.all(Array.from({ length: Math.min(20, count - i) }, () => once(name).catch(() => ["error"])));
      for (const ips of batch) for (const ip of ips) out[ip] = (out[ip] ?? 0) + 1;
    }
    return out;
  };
  const deadline = Date.now() + (args.startTimeoutMs ?? 10_000);
  for (;;) {
    if (exited) {
      rmSync(dir, { recursive: true, force: true });
      const noBind = /bind.*(not found|Unable to load)/i.test(out);
      if (noBind) throw new PdnsMissingError("pdns bind backend (libbindbackend.so)");
      throw new PdnsStartError(`pdns_server exited at start-up:\n${out}`);
    }
    try {
      await query();
      break;
    } catch {
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        rmSync(dir, { recursive: true, force: true });
        throw new PdnsStartError(`pdns_server did not answer ${name} on port ${port}:\n${out}`);
      }
      await sleep(50);
    }
  }
  let stopped: Promise<void> | null = null;
  const control = process.env.LLMHA_PDNS_CONTROL ?? "pdns_control";
  const records: Record<string, string[]> = { ...a.records };
  let serial = a.serial;
  let changes: Promise<void> = Promise.resolve();
  const setRecords = (rname: string, addresses: readonly string[]): Promise<void> => {
    // A writer still running while the drill tears down (the local cloud's last sync) has no
    // server left to answer for: nothing to write (its folder is gone), not an error to log.
    if (stopped) return Promise.resolve();
    const next = changes.then(async () => {
      if (stopped) return;
      const text = pdnsZoneText({ ...args, records: { ...records, [rname]: [...addresses] }, serial: serial + 1 });
      records[rname] = [...addresses];
      serial += 1;
      writeFileSync(join(dir, "zone.db"), text);
      const r = await execFileAsync(control, [`--config-dir=${dir}`, "bind-reload-now", a.zone], { timeout: 5000 }).catch((e: Error) => {
        throw new PdnsStartError(`${control} bind-reload-now ${a.zone} failed: ${e.message}`);
      });
      if (!/reloaded|parsed/i.test(`${r.stdout}${r.stderr}`)) throw new PdnsStartError(`${control} bind-reload-now ${a.zone}: ${r.stdout}${r.stderr}`);
    });
    changes = next.catch(() => undefined);
    return next;
  };
  return {
    pid: child.pid ?? -1,
    port,
    name,
    query,
    sample,
    setRecords,
    stop: () =>
      (stopped ??= (async () => {
        if (!exited) await stopChild(child);
        rmSync(dir, { recursive: true, force: true });
      })()),
  };
}
