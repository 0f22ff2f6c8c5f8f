// Entry point named in Pulumi.yaml. The program lives in stack.ts so tests can run it
// under Pulumi's mocks without this module's exports. It is exported as a function: Pulumi
// awaits it, so the pinned chart archive is fetched and checked (stack.ts) before any
// resource is registered, in preview as in up; its result's fields are the stack outputs.
import { createStack } from "./stack";

export = async () => {
  const out = await createStack();
  return {
    clusterName: out.clusterName,
    kubeconfig: out.kubeconfig,
    serviceDnsName: out.serviceDnsName,
    nlbNames: out.nlbNames,
    nlbHostnames: out.nlbHostnames,
    redisEndpoint: out.redisEndpoint,
    kafkaBootstrapBrokers: out.kafkaBootstrapBrokers,
    agentRepositoryUrl: out.agentRepositoryUrl,
    // An existing cluster: the security group an adopted EC2NodeClass or node group must give the GPU nodes.
    gpuNodeSecurityGroupId: out.gpuNodeSecurityGroupId,
    // docs/infra.md step 13: the GPU groups created at 0 and the size to scale each to.
    gpuScaleUp: out.gpuScaleUp,
  };
};
