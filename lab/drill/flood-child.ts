/**
 * The drill's flood, in a process of its own (see paced.ts), pipelined on raw sockets
 * (raw-flood.ts): says `ready`, starts sending on a
 * `go` line on stdin, stops when stdin closes and prints every record as JSON on stdout.
 */
import { createInterface } from "node:readline";
import type { FloodOrder } from "./paced";
import { rawPaced } from "./raw-flood";

const o = JSON.parse(process.argv[2] ?? "{}") as FloodOrder;
let load: ReturnType<typeof rawPaced> | null = null;
const lines = createInterface({ input: process.stdin });
lines.on("line", (l) => {
  if (l.trim() === "go" && !load) load = rawPaced(o.urls, o.headers, o.perS, () => Date.now() - o.epochMs);
});
lines.once("close", () => {
  void (load?.stop() ?? Promise.resolve()).then(() => {
    process.stdout.write(JSON.stringify(load?.records ?? []));
    process.exit(0);
  });
});
process.stdout.write("ready\n");
