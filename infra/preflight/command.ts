import { readStackFile, StackYamlError } from "../stack-yaml";
import { findStack, UsageError } from "../cost/command";
import { BLOCKING, offlineChecks, onlinePlan, type CheckRow } from "./checks";
import { awsClients, onlineChecks, type AwsClients } from "./aws";
import { didYouMean } from "../../contracts/did-you-mean";

const USAGE = `Usage: llm-ha preflight --stack ENV [--online]

What blocks \`pulumi up --stack ENV\` on this account, before anything is created.
Offline (always): the settings only you can give, and the program's own validation of the
stack file. With --online, read-only AWS calls with the current credentials: GPU quota for
P instances in the region, the capacity reservations (AZ, type, state), the instance types
offered in each AZ, the hosted zone. Without --online it prints what those would check.

  --stack ENV   dev, staging, prod (a Pulumi.<ENV>.yaml beside Pulumi.yaml), or a path to one
  --online      make the read-only AWS calls
  -h, --help    this text

Exit status: 0 nothing blocks, 1 something blocks (a row missing, invalid or failed), 2 bad arguments.
`;

/** The table: one row per check, columns padded. */
export function renderRows(rows: CheckRow[]): string {
  const head = { check: "check", status: "status", detail: "detail", fix: "fix" };
  const all = [head, ...rows];
  const w = (k: "check" | "status" | "detail") => Math.min(90, Math.max(...all.map((r) => r[k].length)));
  const line = (r: typeof head) => [r.check.padEnd(w("check")), r.status.padEnd(w("status")), r.detail.padEnd(w("detail")), r.fix].join("  ").trimEnd();
  return [line(head), ...rows.map(line)].join("\n") + "\n";
}

export async function preflightCommand(argv: string[], clients?: (region: string) => AwsClients): Promise<number> {
  let stackArg: string | undefined;
  let online = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-h" || a === "--help") {
      process.stdout.write(USAGE);
      return 0;
    } else if (a === "--online") online = true;
    else if (a === "--stack") stackArg = argv[++i];
    else if (a.startsWith("--stack=")) stackArg = a.slice("--stack=".length);
    else {
      process.stderr.write(`llm-ha preflight: unknown ${a.startsWith("-") ? "flag" : "argument"} ${JSON.stringify(a)}${didYouMean(a.split("=")[0], ["--stack", "--online", "--help"])}\n\n${USAGE}`);
      return 2;
    }
  }
  try {
    if (!stackArg) throw new UsageError("--stack is required");
    const sf = findStack(stackArg);
    const values = readStackFile(sf.file);
    const offline = offlineChecks(values, sf.project, sf.stack);
    let rows = offline.rows;
    process.stdout.write(`llm-ha preflight: stack ${sf.stack} (${sf.file})\n\n`);
    if (online && offline.config && offline.missing.length === 0) {
      rows = [...rows, ...(await onlineChecks(offline.config, (clients ?? awsClients)(offline.config.region)))];
    } else if (online) {
      rows = [...rows, { check: "online checks", status: "missing", detail: "skipped: fix the offline rows first (they feed the calls)", fix: "" }];
    }
    process.stdout.write(renderRows(rows));
    if (!online) {
      process.stdout.write(`\nOnline checks (read-only; run with --online and AWS credentials for the target account):\n`);
      for (const p of onlinePlan(offline.config, offline.missing)) process.stdout.write(`  - ${p}\n`);
    }
    const blocking = rows.filter((r) => BLOCKING.includes(r.status));
    process.stdout.write(`\n${blocking.length === 0 ? "nothing blocks" : `${blocking.length} blocking`}${online ? "" : " (offline checks only)"}\n`);
    return blocking.length === 0 ? 0 : 1;
  } catch (err) {
    if (err instanceof UsageError || err instanceof StackYamlError) {
      process.stderr.write(`llm-ha preflight: ${err.message}\n${err instanceof UsageError ? `\n${USAGE}` : ""}`);
      return 2;
    }
    throw err;
  }
}
