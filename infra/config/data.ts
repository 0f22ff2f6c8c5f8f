import * as pulumi from "@pulumi/pulumi";
import type { Settings } from "./read";
import type { StackConfig } from "./stack-config";

/** `llm-ha:redis` and `redisAuthToken`: the registry and leader lease (ElastiCache). */
export function redisOf(s: Settings, azs: string[]): StackConfig["redis"] {
  const redis = s.obj("redis");
  const replicas = s.int(redis, "replicas", s.key("redis.replicas"), Math.min(azs.length, 3), 2);
  const authToken = s.cfg.getSecret("redisAuthToken");
  if (authToken === undefined) s.p.add(s.key("redisAuthToken"), "is required (pulumi config set --secret redisAuthToken <16-128 chars>)");
  return { nodeType: s.str(redis, "nodeType", s.key("redis.nodeType"), "cache.r7g.large"), replicas, authToken: authToken ?? pulumi.secret("") };
}

/** `llm-ha:kafka`: the event log (MSK), replication factor 3. */
export function kafkaOf(s: Settings, azs: string[]): StackConfig["kafka"] {
  const kafka = s.obj("kafka");
  const c = {
    version: s.str(kafka, "version", s.key("kafka.version"), "3.6.0"),
    brokersPerAz: s.int(kafka, "brokersPerAz", s.key("kafka.brokersPerAz"), 1),
    instanceType: s.str(kafka, "instanceType", s.key("kafka.instanceType"), "kafka.m7g.large"),
    volumeSizeGb: s.int(kafka, "volumeSizeGb", s.key("kafka.volumeSizeGb"), 100),
  };
  if (c.brokersPerAz * azs.length < 3) s.p.add(s.key("kafka.brokersPerAz"), "MSK needs at least 3 brokers for replication factor 3");
  return c;
}
