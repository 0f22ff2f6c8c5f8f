/**
 * The drill's flood, in a process of its own (see paced.ts): sends until its stdin closes, then
 * prints every record as JSON on stdout.
 */
import { paced, type FloodOrder } from "./paced";

const o = JSON.parse(process.argv[2] ?? "{}") as FloodOrder;
let i = 0;
const load = paced(() => o.urls[i++ % o.urls.length], () => o.headers, o.perS, () => Date.now() - o.epochMs);
process.stdin.resume();
process.stdin.once("end", () => {
  void load.stop().then(() => {
    process.stdout.write(JSON.stringify(load.records));
    process.exit(0);
  });
});
