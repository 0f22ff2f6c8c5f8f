/**
 * The local cloud's zonal shift (`POST /shift/start`, `/shift/cancel`): every AZ proxy puts the
 * AZ's server rows in MAINT (`set server … state maint`) until the shift is cancelled or
 * expires, as an ARC zonal shift on the NLBs takes the AZ out and lifts itself at expiry.
 */
import type { LocalCloudReply } from "../../agent/src/fleet/actuators/local";
import type { HaproxyHandle } from "../engines/haproxy";

/** An AZ proxy as the cloud needs it: its HAProxy (null while dead), its backend name, and its server names per AZ. */
export interface CloudProxy {
  haproxy: HaproxyHandle | null;
  proxy: string;
  /** Names of the server rows (the `server-template` slots) of an AZ's nodes in this proxy. */
  serversOf(az: string): string[];
}

export class LocalZonalShift {
  private readonly shifts = new Map<string, { expiresAt: number; timer: NodeJS.Timeout }>();

  constructor(
    private readonly proxies: () => CloudProxy[],
    private readonly log: (line: string) => void,
  ) {}

  /** Starts (or renews) a shift away from `az` for `expiresInMs` (> 0). */
  async start(az: string, expiresInMs: number): Promise<LocalCloudReply> {
    const held = this.shifts.get(az);
    if (held) clearTimeout(held.timer);
    const rows = held ? 0 : await this.setServers(az, "maint");
    const expiresAt = Date.now() + expiresInMs;
    const timer = setTimeout(() => {
      // ARC lifts an expired shift by itself.
      this.shifts.delete(az);
      void this.setServers(az, "ready").catch((err: unknown) => this.log(`local cloud: shift expiry ${az}: ${(err as Error).message}`));
    }, expiresInMs);
    timer.unref();
    this.shifts.set(az, { expiresAt, timer });
    const until = new Date(expiresAt).toISOString();
    return held
      ? { outcome: "already", detail: `${az}: shift renewed until ${until}` }
      : { outcome: "applied", detail: `${az}: ${rows} server rows in MAINT until ${until}` };
  }

  async cancel(az: string): Promise<LocalCloudReply> {
    const held = this.shifts.get(az);
    if (!held) return { outcome: "already", detail: `${az}: no shift` };
    clearTimeout(held.timer);
    this.shifts.delete(az);
    const rows = await this.setServers(az, "ready");
    return { outcome: "applied", detail: `${az}: ${rows} server rows ready` };
  }

  /** Drops every pending expiry (the drill is stopping). */
  stop(): void {
    for (const s of this.shifts.values()) clearTimeout(s.timer);
    this.shifts.clear();
  }

  /** `set server <backend>/<slot> state <state>` for the AZ's server rows in every live AZ proxy. */
  private async setServers(az: string, state: "maint" | "ready"): Promise<number> {
    let rows = 0;
    for (const p of this.proxies()) {
      if (!p.haproxy) continue;
      for (const id of p.serversOf(az)) {
        const out = await p.haproxy.command(`set server ${p.proxy}/${id} state ${state}`);
        if (out.trim() !== "") throw new Error(`haproxy: set server ${p.proxy}/${id} state ${state}: ${out.trim()}`);
        rows++;
      }
    }
    return rows;
  }
}
