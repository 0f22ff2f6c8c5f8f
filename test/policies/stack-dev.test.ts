import { describeStackPolicies } from "./stack-suite";

describeStackPolicies("dev");
