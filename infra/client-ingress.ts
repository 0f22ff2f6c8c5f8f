import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { tagged } from "./tags";

/**
 * One ingress rule per client on `securityGroupId` for `port`, each client's security group by
 * reference, never a CIDR: a pod outside those groups has no route in. Shared by the data stores
 * the stack creates and the ones it adopts (the rules then go on the operator's group).
 */
export function clientIngress(name: string, securityGroupId: pulumi.Input<string>, clients: Record<string, pulumi.Input<string>>, port: pulumi.Input<number>, parent: pulumi.Resource): aws.vpc.SecurityGroupIngressRule[] {
  return Object.entries(clients).map(
    ([client, groupId]) =>
      new aws.vpc.SecurityGroupIngressRule(
        `${name}-from-${client}`,
        { securityGroupId, referencedSecurityGroupId: groupId, ipProtocol: "tcp", fromPort: port, toPort: port, description: client, tags: tagged() },
        { parent },
      ),
  );
}
