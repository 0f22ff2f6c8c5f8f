import { readStackFile, StackYamlError } from "../stack-yaml";
import { findStack, UsageError } from "../cost/command";
import { BLOCKING, offlineChecks, onlinePlan, type CheckRow } from "./checks";
import { awsClients, onlineChecks, type AwsClients } from "./aws";
import { didYouMean } from "../../contracts/did-you-mean";
import { OutputFlagError, outputMode, renderTable, terminalColumns, wrapCommand, wrapText, type OutputMode } from "../../contracts/table";

/** Schema version of \`preflight -o json\`. */
export const PREFLIGHT_JSON_VERSION = 1;

const USAGE = `Usage: llm-ha preflight --stack ENV [--online] [-o text|wide|json]

What blocks \`pulumi up --stack ENV\` on this account, before anything is created.
Offline (always): the settings only you can give, and the program's own validation of the
stack file. With --online, read-only AWS calls with the current credentials: the vCPU quotas
for P and Standard instances in the region, the capacity reservations and Capacity Blocks
(AZ, type, active, instances free), the instance types offered in each AZ, the hosted zone,
the ACM certificate (issued, in the region, naming the service), the Docker Hub pull-through
secret, and through the aws CLI the add-ons, the agent image and the weights. Without
--online it prints what those would check.

  --stack ENV   dev, staging, prod (a Pulumi.<ENV>.yaml beside Pulumi.yaml), or a path to one
  --online      make the read-only AWS calls
  -o text       (default) verdict first, fitted to $COLUMNS, each fix on its own lines
                (long commands broken with a trailing \\ so that they still paste)
  -o wide       one row per check with every column at full length
  -o json       one document: {version, stack, file, online, rows: [{check, status, detail,
                fix}], onlinePlan, blocking}
  -h, --help    this text

Exit status: 0 nothing blocks, 1 something blocks (a row missing, invalid or failed), 2 bad arguments.
`;

/**
 * The table: one row per check, the verdict first. Fitted to `width`, the detail is shortened
 * and each fix printed under its row (whole: it is what to paste); `wide`: one full line each.
 */
export function renderRows(rows: CheckRow[], o: { width?: number; wide?: boolean } = {}): string {
  const cols = [{ head: "STATUS" }, { head: "CHECK" }, { head: "DETAIL", shrink: true }, { head: "FIX", wide: true }];
  const lines = renderTable(cols, rows.map((r) => [r.status, r.check, r.detail, r.fix]), o);
  if (o.wide) return lines.join("\n") + "\n";
  const out = [lines[0]];
  rows.forEach((r, i) => {
    out.push(lines[i + 1]);
    if (r.fix) out.push(...wrapCommand(`fix: ${r.fix}`, o.width ?? Infinity, "    "));
  });
  return out.join("\n") + "\n";
}

export async function preflightCommand(argv: string[], clients?: (region: string) => AwsClients): Promise<number> {
  let stackArg: string | undefined;
  let online = false;
  let output: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-h" || a === "--help") {
      process.stdout.write(USAGE);
      return 0;
    } else if (a === "--online") online = true;
    else if (a === "-o" || a === "--output") output = argv[++i] ?? "";
    else if (a.startsWith("--output=")) output = a.slice("--output=".length);
    else if (a === "--stack") stackArg = argv[++i];
    else if (a.startsWith("--stack=")) stackArg = a.slice("--stack=".length);
    else {
      process.stderr.write(`llm-ha preflight: unknown ${a.startsWith("-") ? "flag" : "argument"} ${JSON.stringify(a)}${didYouMean(a.split("=")[0], ["--stack", "--online", "--output", "--help"])}\n\n${USAGE}`);
      return 2;
    }
  }
  let mode: OutputMode;
  try {
    mode = outputMode(output);
  } catch (e) {
    if (!(e instanceof OutputFlagError)) throw e;
    process.stderr.write(`llm-ha preflight: ${e.message}\n`);
    return 2;
  }
  const width = terminalColumns();
  try {
    if (!stackArg) throw new UsageError("--stack is required");
    const sf = findStack(stackArg);
    const values = readStackFile(sf.file);
    const offline = offlineChecks(values, sf.project, sf.stack);
    let rows = offline.rows;
    const say = (text: string): void => {
      if (mode !== "json") process.stdout.write(text);
    };
    say(`llm-ha preflight: stack ${sf.stack} (${sf.file})\n\n`);
    if (online && offline.config && offline.missing.length === 0) {
      rows = [...rows, ...(await onlineChecks(offline.config, (clients ?? awsClients)(offline.config.region)))];
    } else if (online) {
      rows = [...rows, { check: "online checks", status: "missing", detail: "skipped: fix the offline rows first (they feed the calls)", fix: "" }];
    }
    const plan = online ? [] : onlinePlan(offline.config, offline.missing);
    const blocking = rows.filter((r) => BLOCKING.includes(r.status));
    if (mode === "json") {
      const doc = { version: PREFLIGHT_JSON_VERSION, stack: sf.stack, file: sf.file, online, rows, onlinePlan: plan, blocking: blocking.length };
      process.stdout.write(JSON.stringify(doc, null, 2) + "\n");
      return blocking.length === 0 ? 0 : 1;
    }
    say(renderRows(rows, { width, wide: mode === "wide" }));
    if (!online) {
      const fit = (text: string, indent: string): string => (mode === "wide" ? [text] : wrapText(text, width, indent)).join("\n") + "\n";
      say("\n" + fit("Online checks (read-only; run with --online and AWS credentials for the target account):", ""));
      for (const p of plan) say(fit(`  - ${p}`, "    "));
    }
    say(`\n${blocking.length === 0 ? "nothing blocks" : `${blocking.length} blocking`}${online ? "" : " (offline checks only)"}\n`);
    return blocking.length === 0 ? 0 : 1;
  } catch (err) {
    if (err instanceof UsageError || err instanceof StackYamlError) {
      process.stderr.write(`llm-ha preflight: ${err.message}\n${err instanceof UsageError ? `\n${USAGE}` : ""}`);
      return 2;
    }
    throw err;
  }
}
