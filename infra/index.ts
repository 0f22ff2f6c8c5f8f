// Entry point named in Pulumi.yaml. The program lives in stack.ts so tests can run it
// under Pulumi's mocks without this module's top-level exports.
import { createStack } from "./stack";

const out = createStack();

export const clusterName = out.clusterName;
export const kubeconfig = out.kubeconfig;
export const serviceDnsName = out.serviceDnsName;
export const nlbNames = out.nlbNames;
export const nlbHostnames = out.nlbHostnames;
export const redisEndpoint = out.redisEndpoint;
export const kafkaBootstrapBrokers = out.kafkaBootstrapBrokers;
export const agentRepositoryUrl = out.agentRepositoryUrl;
