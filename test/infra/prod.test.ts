import { describeStack } from "./stack-suite";

describeStack("prod", { resources: 274 });
