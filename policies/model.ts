// Same model everywhere: a failover moves users to another AZ's servers, and if
// those serve another image, model, revision or precision the answers change under them.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { AZ_LABEL, GPU_RESOURCE, ZONE_KEY, nameOf } from "./conventions";
import { requestsGpu } from "./k8s";
import { MODEL_REVISION_ANNOTATION } from "../contracts/rollout-kube";
import { joinWords, list, num, record, str, stringMap, strings, type Props } from "./props";

const DEPLOYMENT_TYPE = "kubernetes:apps/v1:Deployment";

/** Command-line flags that name what is served: the model, its revision, precision, context and served name. */
export const DEFAULT_MODEL_ARGS: readonly string[] = [
  "--model",
  "--model-id",
  "--revision",
  "--code-revision",
  "--tokenizer",
  "--tokenizer-revision",
  "--dtype",
  "--quantization",
  "--quantize",
  "--kv-cache-dtype",
  "--max-model-len",
  "--max-total-tokens",
  "--served-model-name",
  "--load-format",
];

/** Environment variables that do the same (TGI reads its settings from the environment). */
export const DEFAULT_MODEL_ENV: readonly string[] = [
  "MODEL_ID",
  "MODEL",
  "MODEL_NAME",
  "REVISION",
  "DTYPE",
  "QUANTIZE",
  "MAX_TOTAL_TOKENS",
  "MAX_MODEL_LEN",
];

export interface InferenceOneModelConfig {
  modelArgs: string[];
  modelEnv: string[];
}

/** What one inference Deployment serves, part by part, as text to compare and to show. */
interface Served {
  name: string;
  az: string;
  urn: string;
  /** `container image`, `container --flag value`, `container env NAME=value`, `container serve <model>`. */
  parts: Map<string, string>;
}

function podSpec(workload: Props): Props {
  return record(record(record(workload.spec)?.template)?.spec) ?? {};
}

function asksGpu(c: Props): boolean {
  const res = record(c.resources);
  const amount = num(record(res?.limits)?.[GPU_RESOURCE]) ?? num(record(res?.requests)?.[GPU_RESOURCE]);
  return amount !== undefined && amount > 0;
}

/** `--flag value` and `--flag=value` in argv (a flag given twice: the last wins, as argparse does). */
function flagValues(argv: readonly string[], flags: ReadonlySet<string>): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf("=");
    const flag = eq > 0 ? a.slice(0, eq) : a;
    if (!flags.has(flag)) continue;
    if (eq > 0) out.set(flag, a.slice(eq + 1));
    else {
      const next = argv[i + 1];
      out.set(flag, next !== undefined && !next.startsWith("-") ? next : "");
      if (next !== undefined && !next.startsWith("-")) i++;
    }
  }
  return out;
}

function envValue(e: Props): string {
  const v = str(e.value);
  if (v !== undefined) return v;
  return e.valueFrom !== undefined ? `from ${JSON.stringify(e.valueFrom)}` : "";
}

function azOf(props: Props): string {
  const spec = podSpec(props);
  const labels = stringMap(record(record(record(props.spec)?.template)?.metadata)?.labels);
  const selector = stringMap(spec.nodeSelector);
  return labels[AZ_LABEL] ?? selector[AZ_LABEL] ?? selector[ZONE_KEY] ?? "?";
}

function served(r: PolicyResource, cfg: InferenceOneModelConfig): Served {
  const props = r.props as Props;
  const flags = new Set(cfg.modelArgs);
  const envNames = new Set(cfg.modelEnv);
  const parts = new Map<string, string>();
  const gpuContainers = list(podSpec(props).containers)
    .map(record)
    .filter((c): c is Props => c !== undefined && asksGpu(c));
  for (const c of gpuContainers) {
    const cn = str(c.name) ?? "?";
    parts.set(`${cn} image`, str(c.image) ?? "");
    const argv = [...strings(c.command), ...strings(c.args)];
    // `vllm serve <model>`: the positional model.
    const serve = argv.indexOf("serve");
    if (serve >= 0 && argv[serve + 1] !== undefined && !argv[serve + 1].startsWith("-")) parts.set(`${cn} serve`, argv[serve + 1]);
    for (const [flag, value] of flagValues(argv, flags)) parts.set(`${cn} ${flag}`, value);
    for (const e of list(c.env).map(record)) {
      const n = e ? str(e.name) : undefined;
      if (e && n !== undefined && envNames.has(n)) parts.set(`${cn} env ${n}`, envValue(e));
    }
  }
  // The revision the pods load where the template carries it (`--model $(LLMHA_MODEL_SOURCE)` reads it: contracts/rollout-kube.ts).
  const revision = stringMap(record(record(record(props.spec)?.template)?.metadata)?.annotations)[MODEL_REVISION_ANNOTATION];
  if (revision !== undefined) parts.set(`template ${MODEL_REVISION_ANNOTATION}`, revision);
  return { name: nameOf(props, r.name), az: azOf(props), urn: r.urn, parts };
}

const signature = (s: Served): string => JSON.stringify([...s.parts.entries()].sort(([a], [b]) => a.localeCompare(b)));

/** The differences of `s` from `ref`, for a person: `vllm image x (not y)`, `vllm --revision unset (not abc)`. */
function differences(s: Served, ref: Served): string[] {
  const keys = [...new Set([...s.parts.keys(), ...ref.parts.keys()])].sort();
  const show = (v: string | undefined): string => (v === undefined ? "unset" : JSON.stringify(v));
  return keys.filter((k) => s.parts.get(k) !== ref.parts.get(k)).map((k) => `${k} ${show(s.parts.get(k))} (not ${show(ref.parts.get(k))})`);
}

export const inferenceOneModel: StackValidationPolicy = {
  name: "inference-one-model",
  description:
    `Every AZ's inference Deployments (those requesting ${GPU_RESOURCE}) run one container image with one set of model arguments — the flags and environment variables that name the model, revision, dtype, quantization and context (L2/L3: a failover to another AZ must not change the model, revision or precision that answers).`,
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      modelArgs: {
        type: "array",
        items: { type: "string" },
        default: [...DEFAULT_MODEL_ARGS],
        description: "Container flags (`--flag value` or `--flag=value`) that name what is served; they must be equal across the inference Deployments.",
      },
      modelEnv: {
        type: "array",
        items: { type: "string" },
        default: [...DEFAULT_MODEL_ENV],
        description: "Container environment variables that name what is served; they must be equal across the inference Deployments.",
      },
    },
  },
  validateStack: (args, reportViolation) => {
    const cfg = args.getConfig<InferenceOneModelConfig>();
    const all = args.resources
      .filter((r) => r.type === DEPLOYMENT_TYPE && requestsGpu(r.props as Props))
      .map((r) => served(r, cfg));
    if (all.length < 2) return;
    // The reference: the set most Deployments share (ties: more AZs, then the first in the stack).
    const groups = new Map<string, Served[]>();
    for (const s of all) groups.set(signature(s), [...(groups.get(signature(s)) ?? []), s]);
    const ranked = [...groups.values()].sort(
      (a, b) => b.length - a.length || new Set(b.map((s) => s.az)).size - new Set(a.map((s) => s.az)).size || all.indexOf(a[0]) - all.indexOf(b[0]),
    );
    const reference = ranked[0];
    const ref = reference[0];
    const refNames = joinWords(reference.map((s) => s.name));
    for (const s of all) {
      if (reference.includes(s)) continue;
      reportViolation(
        `Deployment ${s.name} (AZ ${s.az}) serves another model set than ${refNames}: ${differences(s, ref).join("; ")}. Every AZ's inference must run one image and one model argument set.`,
        s.urn,
      );
    }
  },
};
