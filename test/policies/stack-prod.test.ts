import { describeStackPolicies } from "./stack-suite";

describeStackPolicies("prod");
