/**
 * A slow or lossy loopback link: `tc netem` is not in this kernel (no qdisc
 * modules), so latency and partial loss are a userspace TCP proxy on the path. Every byte
 * waits `delayMs` in each direction, in order (a link 300 ms away is 600 ms a round trip);
 * a share `loss` of new connections is lost as a dropped SYN would be: accepted, never
 * forwarded, nothing answered, until the client gives up. The upstream leg can leave from
 * a chosen local address (`localAddress`), so a link cut (netns.ts) can name its source.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface LossyLinkOptions {
  /** Where to listen (address; port 0 = any free one). */
  listen: { host: string; port?: number };
  target: { host: string; port: number };
  /** Source address of the upstream connections (default: the kernel's choice). */
  localAddress?: string;
  /** Seeded randomness for the loss draw (default Math.random). */
  random?: () => number;
}

export class LinkOptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LinkOptionError";
  }
}

/**
 * Forwards `from` to `to` with `delay()` ms added to each chunk, keeping their order. One queue
 * and one timer per direction: a timer per chunk could fire out of order (Node schedules a timer
 * from its loop's cached clock, which lags `Date.now()` by however long the current tick has run,
 * so a chunk queued later in a busy tick could expire before the one ahead of it), and a
 * reordered RESP stream hands one command's reply to another.
 */
function delayedPipe(from: Socket, to: Socket, delay: () => number): void {
  const queue: { at: number; chunk: Buffer | null }[] = [];
  let timer: NodeJS.Timeout | null = null;
  const pump = (): void => {
    timer = null;
    while (queue.length && queue[0].at <= Date.now()) {
      const { chunk } = queue.shift()!;
      if (to.destroyed) continue;
      if (chunk === null) to.end();
      else to.write(chunk);
    }
    if (queue.length) timer = setTimeout(pump, Math.max(1, queue[0].at - Date.now()));
  };
  const push = (chunk: Buffer | null): void => {
    const last = queue.length ? queue[queue.length - 1].at : 0;
    // Never before the chunk ahead of it: a TCP stream stays in order whatever the delay did meanwhile.
    queue.push({ at: Math.max(Date.now() + Math.max(0, delay()), last), chunk });
    if (timer === null) pump();
  };
  from.on("data", (chunk: Buffer) => push(chunk));
  from.on("end", () => push(null));
}

export class LossyLink {
  private readonly sockets = new Set<Socket>();
  private delay = 0;
  private lossShare = 0;
  /** Connections accepted and lost (never forwarded). */
  lost = 0;
  accepted = 0;
  port = 0;
  private constructor(
    private readonly server: Server,
    readonly host: string,
  ) {}

  static async start(o: LossyLinkOptions): Promise<LossyLink> {
    const random = o.random ?? Math.random;
    let self: LossyLink | null = null;
    const server = createServer((client) => {
      const link = self!;
      link.sockets.add(client);
      link.accepted++;
      client.on("close", () => link.sockets.delete(client));
      client.on("error", () => client.destroy());
      if (link.lossShare > 0 && random() < link.lossShare) {
        // A lost SYN: the client's connect would time out; here it is open and hears nothing.
        link.lost++;
        client.pause();
        return;
      }
      const up = connect({ host: o.target.host, port: o.target.port, ...(o.localAddress ? { localAddress: o.localAddress } : {}) });
      link.sockets.add(up);
      const pair = [client, up];
      for (const s of pair) {
        s.on("error", () => pair.forEach((x) => x.destroy()));
        s.on("close", () => {
          link.sockets.delete(s);
          pair.forEach((x) => x.destroy());
        });
      }
      delayedPipe(client, up, () => link.delay);
      delayedPipe(up, client, () => link.delay);
    });
    self = new LossyLink(server, o.listen.host);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(o.listen.port ?? 0, o.listen.host, () => resolve());
    });
    const a = server.address();
    self.port = typeof a === "object" && a ? a.port : 0;
    return self;
  }

  /** One-way delay added to every byte from now on (0: none). */
  setDelay(ms: number): void {
    if (!(Number.isFinite(ms) && ms >= 0)) throw new LinkOptionError(`link delay ${ms} ms: must be a number ≥ 0`);
    this.delay = ms;
  }

  /** Share of new connections lost, from 0 to 1 (open ones are kept). */
  setLoss(share: number): void {
    if (!(Number.isFinite(share) && share >= 0 && share <= 1)) throw new LinkOptionError(`link loss ${share}: must be a share from 0 to 1`);
    this.lossShare = share;
  }

  /** Delay and loss back to none; the connections lost stay lost (their clients time out). */
  heal(): void {
    this.delay = 0;
    this.lossShare = 0;
  }

  get url(): string {
    return `${this.host}:${this.port}`;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
