/**
 * A loopback TCP link for fault injection: forwards connections to a target port and can
 * freeze them (nothing read or forwarded, the sockets left open: a network partition, a
 * silent peer), send new connections elsewhere, or drop them all with what they buffer.
 * The drill puts one between the first Redis primary and its replica and sentinels; the
 * Redis tests put one in front of a client.
 */
import { createServer, connect, type Server, type Socket } from "node:net";

/**
 * A loopback TCP proxy whose connections can be frozen (nothing read or forwarded) and thawed,
 * and whose new connections can be sent elsewhere (`retarget`): a primary endpoint whose name
 * moved to a new primary while the old one went silent without closing anything.
 */
export class FreezableProxy {
  private readonly sockets = new Set<Socket>();
  private frozen = false;
  port = 0;
  private constructor(
    private readonly server: Server,
    private targetPort: number,
  ) {}

  static async start(targetPort: number): Promise<FreezableProxy> {
    let self: FreezableProxy | null = null;
    const server = createServer((client) => {
      const up = connect(self!.targetPort, "127.0.0.1");
      const pair = [client, up];
      for (const s of pair) {
        self!.sockets.add(s);
        s.on("error", () => pair.forEach((x) => x.destroy()));
        s.on("close", () => {
          self!.sockets.delete(s);
          pair.forEach((x) => x.destroy());
        });
        if (self!.frozen) s.pause();
      }
      client.pipe(up);
      up.pipe(client);
    });
    self = new FreezableProxy(server, targetPort);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const a = server.address();
    self.port = typeof a === "object" && a ? a.port : 0;
    return self;
  }
  /** Connections made from now on go to this port (existing ones stay where they are). */
  retarget(port: number): void {
    this.targetPort = port;
    this.frozen = false;
  }
  freeze(): void {
    this.frozen = true;
    for (const s of this.sockets) s.pause();
  }
  thaw(): void {
    this.frozen = false;
    for (const s of this.sockets) s.resume();
  }
  /** Drops every connection at once, whatever is buffered in them (a partition that loses data in flight). */
  cut(): void {
    for (const s of this.sockets) s.destroy();
  }
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

