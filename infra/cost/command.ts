import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { resolveConfig } from "../config";
import { withStandIns } from "../user-settings";
import { parseStackYaml, readStackFile, StackYamlError } from "../stack-yaml";
import { estimateCost } from "./estimate";
import { priceOverride, PriceError, priceTable } from "./prices";
import { renderCost } from "./render";
import { MonthError, monthOf } from "./schedule";
import { didYouMean } from "../../contracts/did-you-mean";
import { OutputFlagError, outputMode, terminalColumns, type OutputMode } from "../../contracts/table";

const USAGE = `Usage: llm-ha cost --stack ENV [--month YYYY-MM] [-o text|wide|json] [--price TYPE=USD_PER_HOUR ...]

GPU hours and On-Demand money per month for one environment, always on and with the
standby AZ's scale-to-zero schedule, from the stack's config (Pulumi.<ENV>.yaml, resolved
as the Pulumi program resolves it) and the price table in infra/cost/prices.json.

  --stack ENV        dev, staging, prod (a Pulumi.<ENV>.yaml beside Pulumi.yaml), or a path to one
  --month YYYY-MM    the month to replay the schedule over (default: the current UTC month)
  -o text            (default) fitted to $COLUMNS: the instance type and GPU-hour columns left out
  -o wide            every column
  --json, -o json    the same numbers, and the prices used, as JSON
  --price T=P        use P USD/h for instance type T in the stack's region (repeatable)
  -h, --help         this text

Exit status: 0 done, 2 bad arguments, unknown stack, bad stack config or no price.
`;

const FLAGS = ["--stack", "--month", "--json", "--output", "--price", "--help"];

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

interface Args {
  stack: string;
  month?: string;
  output: OutputMode;
  prices: string[];
}

function parseArgs(argv: string[]): Args | "help" {
  const a: Partial<Args> & { prices: string[]; output: OutputMode } = { prices: [], output: "text" };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].startsWith("--") && argv[i].includes("=") ? [argv[i].slice(0, argv[i].indexOf("=")), argv[i].slice(argv[i].indexOf("=") + 1)] : [argv[i], undefined];
    const val = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === "") throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "-h":
      case "--help":
        return "help";
      case "--json":
        a.output = "json";
        break;
      case "-o":
      case "--output":
        try {
          a.output = outputMode(val());
        } catch (e) {
          throw e instanceof OutputFlagError ? new UsageError(e.message) : e;
        }
        break;
      case "--stack":
        a.stack = val();
        break;
      case "--month":
        a.month = val();
        break;
      case "--price":
        a.prices.push(val());
        break;
      default:
        throw new UsageError(`unknown ${flag.startsWith("-") ? "flag" : "argument"} ${JSON.stringify(argv[i])}${didYouMean(flag, FLAGS)}`);
    }
  }
  if (a.stack === undefined) throw new UsageError("--stack is required");
  return { stack: a.stack, month: a.month, output: a.output, prices: a.prices };
}

/** The nearest folder at or above `from` that holds a Pulumi.yaml. */
function projectDir(from: string): string | undefined {
  for (let d = path.resolve(from); ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, "Pulumi.yaml"))) return d;
    if (path.dirname(d) === d) return undefined;
  }
}

interface StackFile {
  stack: string;
  file: string;
  project: string;
}

/** `--stack prod` → Pulumi.prod.yaml of the project (cwd first, else this checkout); `--stack x/Pulumi.qa.yaml` → that file. */
export function findStack(arg: string): StackFile {
  const projectName = (dir: string): string => {
    const f = path.join(dir, "Pulumi.yaml");
    const doc = fs.existsSync(f) ? parseStackYaml(fs.readFileSync(f, "utf8")) : null;
    const name = (doc as { name?: unknown } | null)?.name;
    return typeof name === "string" ? name : "llm-ha";
  };
  if (arg.includes("/") || arg.endsWith(".yaml")) {
    const m = /^Pulumi\.(.+)\.yaml$/.exec(path.basename(arg));
    if (!m) throw new UsageError(`--stack ${JSON.stringify(arg)}: a stack file is named Pulumi.<stack>.yaml`);
    if (!fs.existsSync(arg)) throw new UsageError(`--stack ${JSON.stringify(arg)}: no such file`);
    return { stack: m[1], file: arg, project: projectName(path.dirname(arg)) };
  }
  const dir = projectDir(process.cwd()) ?? projectDir(__dirname);
  if (dir === undefined) throw new UsageError(`--stack ${arg}: no Pulumi.yaml in ${process.cwd()} or above; pass a path to a Pulumi.<stack>.yaml`);
  const file = path.join(dir, `Pulumi.${arg}.yaml`);
  if (!fs.existsSync(file)) {
    const found = fs
      .readdirSync(dir)
      .map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1])
      .filter((s): s is string => s !== undefined)
      .sort();
    throw new UsageError(`no stack ${JSON.stringify(arg)} in ${dir}; stacks found: ${found.join(", ") || "none"}`);
  }
  return { stack: arg, file: path.relative(process.cwd(), file) || file, project: projectName(dir) };
}

export async function costCommand(argv: string[]): Promise<number> {
  try {
    const args = parseArgs(argv);
    if (args === "help") {
      process.stdout.write(USAGE);
      return 0;
    }
    const month = monthOf(args.month);
    const sf = findStack(args.stack);
    const file = readStackFile(sf.file);
    // The settings only a user gives (zone, image, tokens, Redis passwords, API access) do not change the cost:
    // stand-ins fill the ones a fresh stack file leaves out (infra/user-settings.ts).
    const { values, secretKeys } = withStandIns(file, sf.stack);
    // The program's own resolution, over Pulumi's own Config reading these values.
    pulumi.runtime.setAllConfig(values, secretKeys.filter((k) => !k.includes(".")));
    const cfg = resolveConfig({ project: new pulumi.Config(sf.project), aws: new pulumi.Config("aws"), stack: sf.stack });
    const overrides = args.prices.map((p) => priceOverride(p, cfg.region, new Date()));
    const report = estimateCost(cfg, { stack: sf.stack, file: sf.file, month, prices: priceTable(), overrides });
    process.stdout.write(args.output === "json" ? JSON.stringify(report, null, 2) + "\n" : renderCost(report, { width: terminalColumns(), wide: args.output === "wide" }));
    return 0;
  } catch (err) {
    if (err instanceof UsageError || err instanceof MonthError || err instanceof PriceError || err instanceof StackYamlError) {
      process.stderr.write(`llm-ha cost: ${err.message}\n${err instanceof UsageError ? `\n${USAGE}` : ""}`);
      return 2;
    }
    if (pulumi.InputPropertiesError.isInstance(err)) {
      process.stderr.write(`llm-ha cost: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}
