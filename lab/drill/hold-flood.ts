/**
 * Connections held open by an attacker: idle, or slowloris (a request head that never ends).
 * `holdInChild` runs the same in a process of its own (lab/drill/flood-child.ts), at the lowest
 * CPU priority. Held against a proxy that caps connections per source, most are closed as they
 * are accepted and come back 200 ms later: thousands of connects a second, which in the drill's
 * own event loop would delay the clients it measures there, unlike an attacker on another host.
 */
import { connect, type Socket } from "node:net";
import { floodChild } from "./paced";

/** The pod or host that floods (any address but the node's, HAProxy's and the prober's). */
export const ATTACKER = "127.0.0.9";

/** One held flood: `n` sockets from `from` to host:port. */
export interface HoldOrder {
  host: string;
  port: number;
  n: number;
  mode: "idle" | "slowloris";
  from?: string;
}

/** A slowloris client: a request head that never ends, one header line every 400 ms. */
export function slowloris(s: Socket): void {
  s.write("GET /livez HTTP/1.1\r\nHost: x\r\n");
  const drip = setInterval(() => s.write("X-a: b\r\n"), 400);
  s.on("close", () => clearInterval(drip));
}

/**
 * Keeps `n` sockets open from `from` (a loopback address) to host:port, each `hold` once
 * connected; a cut one is replaced after 200 ms. Returns the stop; `opened()` counts connects.
 */
export function flood(host: string, port: number, n: number, hold: (s: Socket) => void, from = ATTACKER): (() => void) & { opened(): number } {
  let stopped = false;
  let opened = 0;
  const socks = new Set<Socket>();
  const open = (): void => {
    if (stopped) return;
    opened += 1;
    const s = connect({ host, port, localAddress: from });
    socks.add(s);
    s.on("connect", () => hold(s));
    s.on("error", () => undefined);
    s.on("close", () => {
      socks.delete(s);
      setTimeout(open, 200);
    });
  };
  for (let i = 0; i < n; i++) open();
  const stop = (): void => {
    stopped = true;
    for (const s of socks) s.destroy();
  };
  return Object.assign(stop, { opened: () => opened });
}

/** Every order at once, in this process; the stop returns how many connections were opened. */
export function holdFlood(orders: readonly HoldOrder[]): () => number {
  const stops = orders.map((o) => flood(o.host, o.port, o.n, o.mode === "slowloris" ? slowloris : () => undefined, o.from ?? ATTACKER));
  return () => {
    for (const stop of stops) stop();
    return stops.reduce((a, s) => a + s.opened(), 0);
  };
}

/**
 * `holdFlood` in a child process at the lowest CPU priority; resolves once the child is ready
 * (started before the measurement, so its start-up costs nothing there). `go()` opens the
 * connections, `stop()` ends it and returns how many connections it opened (reconnects included).
 * At nice 19 it still opens and holds every connection; what it yields is the CPU its reconnect
 * loop would take from the proxy and the clients measured beside it on this machine's cores.
 */
export async function holdInChild(orders: readonly HoldOrder[]): Promise<{ go(): void; stop(): Promise<number> }> {
  const child = await floodChild({ hold: orders }, true);
  return {
    go: () => child.go(),
    async stop() {
      const n = Number((JSON.parse((await child.stop()) || "{}") as { opened?: unknown }).opened);
      return Number.isFinite(n) ? n : 0;
    },
  };
}
