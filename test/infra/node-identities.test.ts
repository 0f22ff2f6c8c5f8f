/**
 * Node identities on in the stack: the agent DaemonSet runs as its own ServiceAccount (no role,
 * no API token) with a projected token of audience `llm-ha` that the agent enrols with; the
 * controller verifies it against the cluster's issuer (`LLMHA_IDENTITY_JWKS=kubernetes`,
 * `LLMHA_IDENTITY_ISSUER` = EKS's OIDC issuer) and may read the issuer's keys and nothing more.
 * `llm-ha:nodeIdentities: false` gives the stack as before, with the DaemonSets annotated so;
 * a Kubernetes version that puts no node in the tokens is refused naming the setting.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DaemonSet, Deployment } from "kubernetes-models/apps/v1";
import { ClusterRole } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { ServiceAccount } from "kubernetes-models/v1";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../agent/src/config/load";
import { runPolicies } from "../../policies/runner";
import { agentNodeIdentity } from "../../policies/node-identity";
import { captureStack, type CapturedResource } from "../../infra/capture";
import { problems, resolveWith } from "./resolve-dev";
import { AGENT_SERVICE_ACCOUNT, agentDaemonSet, agentServiceAccount, IDENTITY_TOKEN_DIR, IDENTITY_TOKEN_FILE } from "../../infra/workloads/agent";
import { controllerManifests, controllerNodeReader } from "../../infra/workloads/controller";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- manifests and captured props are untyped JSON

const dir = mkdtempSync(join(tmpdir(), "llmha-identities-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const gpuClass = { name: "h100", instanceType: "p5.48xlarge", instanceTypes: ["p5.48xlarge"], gpusPerNode: 8 } as never;
const ds = (nodeIdentities?: boolean): O =>
  agentDaemonSet({ namespace: "llm-ha", az: "us-east-1a", gpuClass, image: `agent@sha256:${"a".repeat(64)}`, clusterName: "prod", model: "m", redisSecretName: "llm-ha-redis", nodeIdentities }) as O;
const envOf = (c: O): Record<string, string> => Object.fromEntries(c.env.filter((e: O) => "value" in e).map((e: O) => [e.name, e.value]));
const TOKEN_VOLUME = { name: "identity-token", projected: { sources: [{ serviceAccountToken: { audience: "llm-ha", expirationSeconds: 3600, path: "token" } }] } };
const DISCOVERY_RULE = { nonResourceURLs: ["/openid/v1/jwks", "/.well-known/openid-configuration"], verbs: ["get"] };
const NODES_RULE = { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] };

describe("the manifests", () => {
  it("the agent DaemonSet (default on): its own ServiceAccount, no API token, the identity token alone in a projected volume, read-only in the agent container only; the agent accepts the setting", () => {
    const d = ds();
    expect(() => new DaemonSet(d as never).validate()).not.toThrow();
    const pod = d.spec.template.spec;
    expect(pod.serviceAccountName).toBe(AGENT_SERVICE_ACCOUNT);
    expect(pod.automountServiceAccountToken).toBe(false);
    // The non-root agent reads it: runAsUser/runAsGroup 10001 and fsGroup 10001, which the kubelet makes the token's group.
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 });
    expect(pod.volumes.filter((v: O) => v.projected)).toEqual([TOKEN_VOLUME]);
    const [agent, relay] = pod.containers;
    expect(agent.volumeMounts).toContainEqual({ name: "identity-token", mountPath: IDENTITY_TOKEN_DIR, readOnly: true });
    expect(relay.volumeMounts.map((m: O) => m.name)).not.toContain("identity-token");
    expect(envOf(agent).LLMHA_IDENTITY_TOKEN_FILE).toBe(IDENTITY_TOKEN_FILE);
    expect(IDENTITY_TOKEN_FILE).toBe(`${IDENTITY_TOKEN_DIR}/token`);
    expect(d.metadata.annotations["llm-ha.io/node-identities"]).toBeUndefined();
    // The Redis password file the manifest names exists on a node only: a stand-in here.
    const pw = join(dir, "redis-password");
    writeFileSync(pw, "pw\n");
    expect(parseConfig([], { ...envOf(agent), LLMHA_REDIS_PASSWORD_FILE: pw }).identityTokenFile).toBe(IDENTITY_TOKEN_FILE);

    const sa = agentServiceAccount("llm-ha") as O;
    expect(() => new ServiceAccount(sa as never).validate()).not.toThrow();
    expect(sa).toMatchObject({ metadata: { name: AGENT_SERVICE_ACCOUNT, namespace: "llm-ha" }, automountServiceAccountToken: false });
  });

  it("off: the DaemonSet as before, annotated llm-ha.io/node-identities: off", () => {
    const d = ds(false);
    expect(() => new DaemonSet(d as never).validate()).not.toThrow();
    const pod = d.spec.template.spec;
    expect(pod.serviceAccountName).toBeUndefined();
    expect(pod.volumes.filter((v: O) => v.projected)).toEqual([]);
    expect(envOf(pod.containers[0]).LLMHA_IDENTITY_TOKEN_FILE).toBeUndefined();
    expect(d.metadata.annotations["llm-ha.io/node-identities"]).toBe("off");
  });

  it("the controller verifies enrolments against the cluster's issuer, and may read its keys and nothing more", () => {
    const { deployment } = controllerManifests({ namespace: "llm-ha-edge", image: `agent@sha256:${"ab".repeat(32)}`, clusterName: "prod", redisSecretName: "r", replicas: 3, identityIssuer: "https://oidc.eks.us-east-1.amazonaws.com/id/X" });
    expect(() => new Deployment(deployment as never).validate()).not.toThrow();
    expect(envOf((deployment as O).spec.template.spec.containers[0])).toMatchObject({ LLMHA_INVENTORY: "kubernetes", LLMHA_IDENTITY_JWKS: "kubernetes", LLMHA_IDENTITY_ISSUER: "https://oidc.eks.us-east-1.amazonaws.com/id/X" });
    const on = controllerNodeReader("llm-ha-edge", true).clusterRole;
    expect(() => new ClusterRole(on as never).validate()).not.toThrow();
    expect(on.rules).toEqual([NODES_RULE, DISCOVERY_RULE]);
    expect(controllerNodeReader("llm-ha-edge").clusterRole.rules).toEqual([NODES_RULE]);
    const off = controllerManifests({ namespace: "llm-ha-edge", image: `agent@sha256:${"ab".repeat(32)}`, clusterName: "prod", redisSecretName: "r", replicas: 3 });
    expect(Object.keys(envOf((off.deployment as O).spec.template.spec.containers[0])).filter((k) => k.startsWith("LLMHA_IDENTITY"))).toEqual([]);
  });
});

describe("the prod stack", () => {
  const k8s = (rs: CapturedResource[], kind: string) => rs.filter((r) => r.type.startsWith("kubernetes:") && (r.props as O).kind === kind).map((r) => r.props as O);
  const agents = (rs: CapturedResource[]) => k8s(rs, "DaemonSet").filter((d) => d.spec.template.metadata.labels["app.kubernetes.io/name"] === "llm-ha-agent");
  const controllerEnv = (rs: CapturedResource[]) => envOf(k8s(rs, "Deployment").find((d) => d.metadata.name === "llm-ha-controller")!.spec.template.spec.containers[0]);
  const role = (rs: CapturedResource[]) => k8s(rs, "ClusterRole").find((r) => r.metadata.name === "llm-ha-controller-nodes")!;
  let on: CapturedResource[];
  let off: CapturedResource[];
  beforeAll(async () => {
    on = await captureStack("prod");
    off = await captureStack("prod", { "llm-ha:nodeIdentities": "false" });
  });

  it("on by default: every agent DaemonSet enrols with its token, as a ServiceAccount bound to nothing; the controller checks the EKS cluster's issuer", async () => {
    expect(agents(on).length).toBeGreaterThan(0);
    for (const d of agents(on)) {
      expect(d.spec.template.spec.serviceAccountName).toBe(AGENT_SERVICE_ACCOUNT);
      expect(d.spec.template.spec.volumes).toContainEqual(TOKEN_VOLUME);
    }
    const sa = k8s(on, "ServiceAccount").filter((s) => s.metadata.name === AGENT_SERVICE_ACCOUNT);
    expect(sa).toHaveLength(1);
    expect(sa[0].metadata.namespace).toBe(agents(on)[0].metadata.namespace);
    expect(sa[0].automountServiceAccountToken).toBe(false);
    const bound = [...k8s(on, "ClusterRoleBinding"), ...k8s(on, "RoleBinding")].flatMap((b) => b.subjects ?? []).filter((s: O) => s.name === AGENT_SERVICE_ACCOUNT);
    expect(bound).toEqual([]);
    const cluster = on.find((r) => r.type === "aws:eks/cluster:Cluster")!;
    expect(controllerEnv(on)).toMatchObject({ LLMHA_IDENTITY_JWKS: "kubernetes", LLMHA_IDENTITY_ISSUER: `https://oidc.eks.us-east-1.amazonaws.com/id/${cluster.name}` });
    expect(role(on).rules).toEqual([NODES_RULE, DISCOVERY_RULE]);
    expect((await runPolicies([agentNodeIdentity], on)).map((v) => v.message)).toEqual([]);
  });

  it("llm-ha:nodeIdentities false: no token, no agent ServiceAccount, no identity settings, the role as before; the policy lets the annotated DaemonSets through", async () => {
    expect(on.length - off.length).toBe(1);
    for (const d of agents(off)) {
      expect(d.spec.template.spec.serviceAccountName).toBeUndefined();
      expect(JSON.stringify(d)).not.toContain("serviceAccountToken");
      expect(d.metadata.annotations["llm-ha.io/node-identities"]).toBe("off");
    }
    expect(k8s(off, "ServiceAccount").map((s) => s.metadata.name)).not.toContain(AGENT_SERVICE_ACCOUNT);
    expect(Object.keys(controllerEnv(off)).filter((k) => k.startsWith("LLMHA_IDENTITY"))).toEqual([]);
    expect(role(off).rules).toEqual([NODES_RULE]);
    expect((await runPolicies([agentNodeIdentity], off)).map((v) => v.message)).toEqual([]);
    // The same DaemonSets without the annotation are refused.
    const stripped = off.map((r) => (r.type === "kubernetes:apps/v1:DaemonSet" ? { ...r, props: { ...r.props, metadata: { ...(r.props.metadata as O), annotations: {} } } } : r));
    expect((await runPolicies([agentNodeIdentity], stripped)).length).toBe(agents(off).length);
  });
});

describe("the setting", () => {

  it("defaults to on, takes false, and refuses anything else", () => {
    expect(resolveWith({}).nodeIdentities).toBe(true);
    expect(resolveWith({ "llm-ha:nodeIdentities": "false" }).nodeIdentities).toBe(false);
    expect(problems({ "llm-ha:nodeIdentities": "off" })).toEqual(['llm-ha:nodeIdentities: must be true or false, got "off"']);
  });

  it("refuses identities on a Kubernetes version whose tokens name no node, naming the setting; false lets the version alone decide", () => {
    const on = problems({ "llm-ha:kubernetesVersion": "1.29" });
    expect(on).toContainEqual(expect.stringMatching(/^llm-ha:nodeIdentities: node identities need Kubernetes ≥ 1\.30 .*llm-ha:kubernetesVersion is 1\.29: upgrade the cluster, or set llm-ha:nodeIdentities false/));
    const off = problems({ "llm-ha:kubernetesVersion": "1.29", "llm-ha:nodeIdentities": "false" });
    expect(off.map((p) => p.split(":").slice(0, 2).join(":"))).toEqual(["llm-ha:kubernetesVersion"]);
  });
});
