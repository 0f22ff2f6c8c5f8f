import { describeStack } from "./stack-suite";

describeStack("dev", { resources: 233 });
