/** `llm-ha status` pointed at a port that is not Redis says so, instead of ioredis' "Please report this". */
import { spawn } from "node:child_process";
import { createServer as createHttp } from "node:http";
import { createServer as createTcp, type Server } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../../agent/src/util/net";

const CLI = join(__dirname, "..", "..", "agent", "src", "cli.ts");
let servers: Server[] = [];
afterEach(async () => {
  for (const s of servers) {
    s.close();
    s.emit("close");
  }
  servers = [];
});

function status(port: number): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, ["--import", "tsx", CLI, "status", "--redis-url", `redis://127.0.0.1:${port}`], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    c.stderr.on("data", (b) => (stderr += b));
    c.on("exit", (code) => resolve({ code, stderr }));
  });
}

describe("llm-ha status against a port that does not speak Redis", () => {
  it("says so for a raw TCP service and for an HTTP server, exit 1", async () => {
    // A service that greets with a banner and waits (SSH does), so the reply is what the client reads.
    const sockets: import("node:net").Socket[] = [];
    const raw = createTcp((s) => {
      sockets.push(s);
      s.on("error", () => undefined);
      s.write("unexpected banner\r\n");
    });
    raw.on("close", () => sockets.forEach((s) => s.destroy()));
    const http = createHttp((_q, r) => r.end("hi"));
    const [p1, p2] = [await freePort(), await freePort()];
    await new Promise<void>((r) => raw.listen(p1, "127.0.0.1", r));
    await new Promise<void>((r) => http.listen(p2, "127.0.0.1", r));
    servers.push(raw, http);
    for (const port of [p1, p2]) {
      const r = await status(port);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("does not speak the Redis protocol");
      expect(r.stderr).not.toContain("Please report this");
    }
  });
});
