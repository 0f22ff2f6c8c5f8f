// Game-day experiment templates (AWS FIS) may only hurt the stack they belong to, and must stop
// when the service burns its availability budget: every template is held by a CloudWatch alarm,
// every target names the stack's resources (by tag, ARN or, for pods, cluster, namespace and
// selector), and its actions and resource types are those the project's templates use.
import { type ResourceValidationPolicy } from "@pulumi/policy";
import { ALARM_STOP_SOURCE, ALLOWED_FIS_ACTIONS, ALLOWED_FIS_RESOURCE_TYPES, FIS_RESOURCE_TYPES, POD_TARGET_PARAMETERS } from "../contracts/gameday";
import { isWildcardResource } from "./iam";
import { joinWords, list, record, str, strings, type Props } from "./props";

export const FIS_TEMPLATE_TYPE = "aws:fis/experimentTemplate:ExperimentTemplate";

export interface GamedayTemplateConfig {
  allowedActions: string[];
  allowedResourceTypes: string[];
}

/** Whether a target names the stack's resources rather than every one of its type in the account. */
function scopeProblem(t: Props): string | undefined {
  const type = str(t.resourceType) ?? "";
  if (type === FIS_RESOURCE_TYPES.pod) {
    const params = record(t.parameters) ?? {};
    const missing = POD_TARGET_PARAMETERS.filter((k) => typeof params[k] !== "string" || (params[k] as string).trim() === "");
    return missing.length > 0 ? `selects pods without ${joinWords(missing)} (FIS finds pods by these parameters only)` : undefined;
  }
  const tags = list(t.resourceTags).map(record).filter((x) => x !== undefined && str(x.key) && str(x.value) !== undefined);
  const arns = strings(t.resourceArns).filter((a) => a !== "" && !isWildcardResource(a));
  if (tags.length === 0 && arns.length === 0) {
    // A filter alone (an AZ, a state) still matches every resource of the type in the account that passes it.
    return list(t.filters).length > 0 ? "is selected by filters alone, which match any resource of the account" : "has no resourceTags or resourceArns: every resource of its type in the account";
  }
  return undefined;
}

export const gamedayTemplates: ResourceValidationPolicy = {
  name: "gameday-templates-scoped",
  description:
    "Every AWS FIS experiment template has a CloudWatch alarm stop condition (the availability SLO's fast burn), selects its targets by tag, ARN or pod selector (never every resource of a type in the account), and uses only the actions and resource types of the project's game-day templates (L1–L4: a game day may hurt only its own stack, and stops when clients feel it).",
  enforcementLevel: "mandatory",
  configSchema: {
    properties: {
      allowedActions: { type: "array", items: { type: "string" }, default: [...ALLOWED_FIS_ACTIONS], description: "FIS action ids a template may use." },
      allowedResourceTypes: { type: "array", items: { type: "string" }, default: [...ALLOWED_FIS_RESOURCE_TYPES], description: "FIS target resource types a template may select." },
    },
  },
  validateResource: (args, reportViolation) => {
    if (args.type !== FIS_TEMPLATE_TYPE) args.notApplicable("Policy only applies to FIS experiment templates");
    const { allowedActions, allowedResourceTypes } = args.getConfig<GamedayTemplateConfig>();
    const p = args.props as Props;
    const stops = list(p.stopConditions).map(record).filter((s): s is Props => s !== undefined);
    if (!stops.some((s) => s.source === ALARM_STOP_SOURCE && (str(s.value) ?? "") !== "")) {
      const sources = stops.map((s) => str(s.source) ?? "?");
      reportViolation(`FIS template ${args.name} has no ${ALARM_STOP_SOURCE} stop condition${sources.length ? ` (only ${joinWords(sources)})` : ""}: nothing stops the experiment when the SLO burns.`);
    }
    for (const t of list(p.targets).map(record).filter((x): x is Props => x !== undefined)) {
      const name = str(t.name) ?? "?";
      const type = str(t.resourceType) ?? "";
      if (!allowedResourceTypes.includes(type)) reportViolation(`FIS template ${args.name} target ${name} selects ${type || "no resource type"}, outside the game day's types (${allowedResourceTypes.join(", ")}).`);
      const problem = scopeProblem(t);
      if (problem) reportViolation(`FIS template ${args.name} target ${name} ${problem}; name the stack's own resources.`);
    }
    const beyond = list(p.actions)
      .map(record)
      .map((a) => str(a?.actionId) ?? "")
      .filter((id) => !allowedActions.includes(id));
    if (beyond.length > 0) reportViolation(`FIS template ${args.name} uses ${joinWords(beyond.map((a) => a || "an action without id"))}, beyond the game day's actions.`);
  },
};
