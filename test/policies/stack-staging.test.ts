import { describeStackPolicies } from "./stack-suite";

describeStackPolicies("staging");
