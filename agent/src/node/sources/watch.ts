import { connect, type Socket } from "node:net";

/**
 * Holds an idle TCP connection to the inference server. When the process dies the
 * kernel closes it at once, so a crash is seen in milliseconds instead of at the next
 * check; `onClose` then runs the model check. An idle close by the server (keep-alive
 * timeout) only costs one extra check.
 */
export class ConnectionWatch {
  private socket: Socket | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly retryMs: number,
    private readonly onClose: () => void,
  ) {}

  start(): void {
    this.closed = false;
    this.open();
  }

  stop(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.socket?.destroy();
    this.socket = null;
  }

  private open(): void {
    if (this.closed) return;
    let connected = false;
    const s = connect({ host: this.host, port: this.port });
    this.socket = s;
    s.setNoDelay(true);
    s.on("connect", () => {
      connected = true;
    });
    s.on("data", () => {
      /* an idle watch connection expects nothing; ignore stray bytes */
    });
    s.on("error", () => {
      /* reported through 'close' */
    });
    s.on("close", () => {
      if (this.closed) return;
      if (connected) this.onClose();
      this.timer = setTimeout(() => this.open(), connected ? 0 : this.retryMs);
      this.timer.unref?.();
    });
  }
}
