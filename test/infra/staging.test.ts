import { describeStack } from "./stack-suite";

describeStack("staging", { resources: 256 });
