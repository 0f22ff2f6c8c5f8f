/**
 * The drill's flood, in a process of its own (see paced.ts): says `ready`, starts sending on a
 * `go` line on stdin, stops when stdin closes and prints every record as JSON on stdout.
 */
import { createInterface } from "node:readline";
import { paced, type FloodOrder } from "./paced";

const o = JSON.parse(process.argv[2] ?? "{}") as FloodOrder;
let i = 0;
let load: ReturnType<typeof paced> | null = null;
const lines = createInterface({ input: process.stdin });
lines.on("line", (l) => {
  if (l.trim() === "go" && !load) load = paced(() => o.urls[i++ % o.urls.length], () => o.headers, o.perS, () => Date.now() - o.epochMs);
});
lines.once("close", () => {
  void (load?.stop() ?? Promise.resolve()).then(() => {
    process.stdout.write(JSON.stringify(load?.records ?? []));
    process.exit(0);
  });
});
process.stdout.write("ready\n");
