// EKS control-plane logs are how an L2/L3 incident is reconstructed afterwards (who
// drained, which node went NotReady when). Advisory: they do not move traffic.
import * as aws from "@pulumi/aws";
import { validateResourceOfType, type ResourceValidationPolicy } from "@pulumi/policy";
import { strings } from "./props";

export interface ControlPlaneLoggingConfig {
  requiredLogTypes: string[];
}

export const eksControlPlaneLogging: ResourceValidationPolicy = {
  name: "eks-control-plane-logging",
  description:
    "EKS clusters send the api, audit and authenticator control-plane logs to CloudWatch (L2 cluster and L3 zone tiers: a failover can be reconstructed from what the control plane saw).",
  enforcementLevel: "advisory",
  configSchema: {
    properties: {
      requiredLogTypes: {
        type: "array",
        items: { type: "string", enum: ["api", "audit", "authenticator", "controllerManager", "scheduler"] },
        default: ["api", "audit", "authenticator"],
        description: "Control-plane log types that must be enabled.",
      },
    },
  },
  validateResource: validateResourceOfType(aws.eks.Cluster, (cluster, args, reportViolation) => {
    const { requiredLogTypes } = args.getConfig<ControlPlaneLoggingConfig>();
    const enabled = strings(cluster.enabledClusterLogTypes);
    const missing = requiredLogTypes.filter((t) => !enabled.includes(t));
    if (missing.length > 0) {
      reportViolation(`EKS cluster ${args.name} does not enable the ${missing.join(", ")} control-plane log${missing.length > 1 ? "s" : ""}.`);
    }
  }),
};
