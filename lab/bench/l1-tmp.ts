import { runL1Bench } from "./agent-l1";
const faults = (process.argv[2] ?? "wedged").split(",") as never;
const trials = Number(process.argv[3] ?? 10);
void (async () => {
  const r = await runL1Bench({ trials, faults, overheadSeconds: 0 });
  console.log(JSON.stringify(r, null, 1));
})();
