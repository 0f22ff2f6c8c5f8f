import base from "./vitest.config.mts";
const cfg = base as any;
for (const p of cfg.test.projects) p.test.execArgv = ["--cpu-prof", "--cpu-prof-dir=/tmp/vprof", "--cpu-prof-interval=2000"];
export default cfg;
