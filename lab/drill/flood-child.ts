/**
 * The drill's floods, in a process of its own (see paced.ts and hold-flood.ts): requests
 * pipelined on raw sockets (raw-flood.ts), or connections held open (an order with `hold`).
 * Says `ready`, starts on a `go` line on stdin, stops when stdin closes and prints its result
 * as JSON on stdout: every request's record, or `{"opened": n}` for held connections.
 */
import { createInterface } from "node:readline";
import { holdFlood, type HoldOrder } from "./hold-flood";
import type { FloodOrder } from "./paced";
import { rawPaced } from "./raw-flood";

const o = JSON.parse(process.argv[2] ?? "{}") as FloodOrder | { hold: HoldOrder[] };
let load: ReturnType<typeof rawPaced> | null = null;
let held: (() => number) | null = null;
const lines = createInterface({ input: process.stdin });
lines.on("line", (l) => {
  if (l.trim() !== "go" || load || held) return;
  if ("hold" in o) held = holdFlood(o.hold);
  else load = rawPaced(o.urls, o.headers, o.perS, () => Date.now() - o.epochMs);
});
lines.once("close", () => {
  if (held) {
    process.stdout.write(JSON.stringify({ opened: held() }));
    process.exit(0);
  }
  void (load?.stop() ?? Promise.resolve()).then(() => {
    process.stdout.write(JSON.stringify(load?.records ?? []));
    process.exit(0);
  });
});
process.stdout.write("ready\n");
