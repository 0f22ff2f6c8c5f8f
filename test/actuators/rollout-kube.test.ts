/**
 * The Kubernetes rollout actuator against a fake API server on loopback that keeps Deployments
 * and applies the strategic merge patches it gets (annotations merged, containers by name,
 * `resourceVersion` checked): a switch patches only the AZ's inference Deployments (revision
 * annotation, every container running the old inference image, the rollout's id and token),
 * the same revision is `already`, a lower token than the one stamped is `refused-stale`, a
 * concurrent change (409) or a Deployment Pulumi did not hand over is `failed` with nothing
 * patched. `kubeRolloutRequests` reads the Pulumi program's ConfigMap as a `start` request.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { kubeRolloutActuator, kubeRolloutRequests } from "../../agent/src/fleet/actuators/rollout-kube";

type O = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- Kubernetes objects are untyped JSON here

const OLD = `ecr.example/vllm@sha256:${"a".repeat(64)}`;
const NEW = `ecr.example/vllm@sha256:${"b".repeat(64)}`;
const AWSCLI = `ecr.example/aws-cli@sha256:${"c".repeat(64)}`;

function deployment(name: string, az: string, extra: O = {}): O {
  return {
    metadata: { name, namespace: "llm-ha", resourceVersion: "1", labels: { "app.kubernetes.io/name": "inference", "llm-ha.io/az": az }, annotations: { "llm-ha.io/rollout": "handover" } },
    spec: {
      template: {
        metadata: { annotations: { "llm-ha.io/model-revision": "s3://w/rev1" } },
        spec: {
          containers: [{ name: "vllm", image: OLD, args: ["--model", "$(LLMHA_MODEL_SOURCE)"] }],
          initContainers: [{ name: "own-dirs", image: OLD }, { name: "clear-drain", image: OLD }, { name: "weights", image: AWSCLI }],
        },
      },
    },
    ...extra,
  };
}

let deps = new Map<string, O>();
let configMap: O | null = null;
let conflict = false;
const calls: { method: string; path: string; query: Record<string, string>; type?: string; body: unknown }[] = [];
let server: Server;
let url = "";
const log = pino({ level: "silent" });

async function read(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : null;
}

/** Strategic merge of a Deployment patch: maps merge, containers merge by name. */
function merge(target: O, patch: O): void {
  for (const [k, v] of Object.entries(patch)) {
    if ((k === "containers" || k === "initContainers") && Array.isArray(v)) {
      for (const c of v as O[]) Object.assign((target[k] as O[]).find((x) => x.name === c.name) ?? {}, c);
    } else if (v && typeof v === "object" && !Array.isArray(v)) merge((target[k] ??= {}), v as O);
    else target[k] = v;
  }
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void (async () => {
      const u = new URL(req.url ?? "/", "http://x");
      const body = (await read(req)) as O | null;
      calls.push({ method: req.method ?? "", path: u.pathname, query: Object.fromEntries(u.searchParams), type: req.headers["content-type"], body });
      res.setHeader("content-type", "application/json");
      const base = "/apis/apps/v1/namespaces/llm-ha/deployments";
      if (req.method === "GET" && u.pathname === base) {
        const want = Object.fromEntries((u.searchParams.get("labelSelector") ?? "").split(",").map((kv) => kv.split("=")));
        const items = [...deps.values()].filter((d) => Object.entries(want).every(([k, v]) => d.metadata.labels[k] === v));
        res.end(JSON.stringify({ kind: "DeploymentList", items }));
      } else if (req.method === "PATCH" && u.pathname.startsWith(`${base}/`)) {
        const d = deps.get(u.pathname.slice(base.length + 1));
        if (!d) return void ((res.statusCode = 404), res.end("{}"));
        const { resourceVersion, ...meta } = body!.metadata as O;
        if (conflict || resourceVersion !== d.metadata.resourceVersion) return void ((res.statusCode = 409), res.end('{"reason":"Conflict"}'));
        merge(d, { ...body, metadata: meta });
        d.metadata.resourceVersion = String(Number(d.metadata.resourceVersion) + 1);
        res.end(JSON.stringify(d));
      } else if (req.method === "GET" && u.pathname === "/api/v1/namespaces/llm-ha/configmaps/llm-ha-rollout") {
        if (!configMap) return void ((res.statusCode = 404), res.end('{"reason":"NotFound"}'));
        res.end(JSON.stringify(configMap));
      } else {
        res.statusCode = 404;
        res.end("{}");
      }
    })();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
});
beforeEach(() => {
  deps = new Map(["inference-us-east-1a-h100", "inference-us-east-1a-a100", "inference-us-east-1b-h100"].map((n) => [n, deployment(n, n.includes("1a") ? "us-east-1a" : "us-east-1b")]));
  conflict = false;
  configMap = null;
  calls.length = 0;
});

const actuator = () => kubeRolloutActuator({ url, tokenFile: null, caFile: null, namespace: "llm-ha", log });
const req = (token: number, to = { revision: "s3://w/rev2", image: NEW }) => ({ rolloutId: "pulumi-0123456789ab", az: "us-east-1a", nodes: [{ nodeId: "gpu-1", host: "i-0abc" }], to, token });
const patches = () => calls.filter((c) => c.method === "PATCH");

describe("kubeRolloutActuator", () => {
  it("patches the AZ's inference Deployments (revision, inference images, id and token), not another AZ's; then it is already there", async () => {
    const a = actuator();
    expect(a.granularity).toBe("az");
    const r = await a.switch(req(7));
    expect(r.outcome, r.detail).toBe("applied");
    expect(patches().map((c) => c.path.split("/").pop()).sort()).toEqual(["inference-us-east-1a-a100", "inference-us-east-1a-h100"]);
    for (const c of patches()) {
      expect(c.type).toBe("application/strategic-merge-patch+json");
      expect(c.query.fieldManager).toBe("llm-ha-rollout");
    }
    const d = deps.get("inference-us-east-1a-h100")!;
    expect(d.metadata.annotations).toEqual({ "llm-ha.io/rollout": "handover", "llm-ha.io/rollout-id": "pulumi-0123456789ab", "llm-ha.io/rollout-token": "7" });
    expect(d.spec.template.metadata.annotations["llm-ha.io/model-revision"]).toBe("s3://w/rev2");
    expect(d.spec.template.spec.containers[0].image).toBe(NEW);
    // The inference image everywhere it ran; the S3 fetcher's own image untouched.
    expect(d.spec.template.spec.initContainers.map((c: O) => c.image)).toEqual([NEW, NEW, AWSCLI]);
    expect(deps.get("inference-us-east-1b-h100")!.spec.template.metadata.annotations["llm-ha.io/model-revision"]).toBe("s3://w/rev1");

    calls.length = 0;
    expect(await a.switch(req(7))).toMatchObject({ outcome: "already" });
    expect(patches()).toEqual([]);
  });

  it("changes the revision alone when the request names no image", async () => {
    const r = await actuator().switch(req(3, { revision: "s3://w/rev3" } as never));
    expect(r.outcome).toBe("applied");
    const d = deps.get("inference-us-east-1a-a100")!;
    expect(d.spec.template.metadata.annotations["llm-ha.io/model-revision"]).toBe("s3://w/rev3");
    expect(d.spec.template.spec.containers[0].image).toBe(OLD);
  });

  it("refuses a stale leader: a token below the one stamped patches nothing", async () => {
    expect((await actuator().switch(req(9))).outcome).toBe("applied");
    calls.length = 0;
    // The newer term (9) rolls back to rev1; the old term (8) still believes in rev2.
    const r = await actuator().switch(req(8, { revision: "s3://w/rev1", image: OLD }));
    expect(r).toMatchObject({ outcome: "refused-stale", detail: expect.stringContaining("token 9") });
    expect(patches()).toEqual([]);
    expect(deps.get("inference-us-east-1a-h100")!.spec.template.metadata.annotations["llm-ha.io/model-revision"]).toBe("s3://w/rev2");
    // The same term goes on.
    expect((await actuator().switch(req(9, { revision: "s3://w/rev1", image: OLD }))).outcome).toBe("applied");
  });

  it("fails on a concurrent change (409) and on a Deployment Pulumi did not hand over, patching nothing", async () => {
    conflict = true;
    expect(await actuator().switch(req(1))).toMatchObject({ outcome: "failed", detail: expect.stringContaining("409") });
    conflict = false;
    delete deps.get("inference-us-east-1a-a100")!.metadata.annotations["llm-ha.io/rollout"];
    calls.length = 0;
    expect(await actuator().switch(req(1))).toMatchObject({ outcome: "failed", detail: expect.stringContaining("inference-us-east-1a-a100 not handed to the rollout") });
    expect(patches()).toEqual([]);
  });

  it("fails plainly on an AZ without inference Deployments and on a bad image, calling nothing for the latter", async () => {
    expect(await actuator().switch({ ...req(1), az: "us-east-1z" })).toMatchObject({ outcome: "failed", detail: expect.stringContaining("no inference Deployment in us-east-1z") });
    calls.length = 0;
    expect(await actuator().switch(req(1, { revision: "s3://w/rev2", image: "vllm; rm -rf /" }))).toMatchObject({ outcome: "failed" });
    expect(calls).toEqual([]);
  });
});

describe("kubeRolloutRequests", () => {
  const o = () => ({ url, tokenFile: null, caFile: null, namespace: "llm-ha", log });
  it("reads the Pulumi program's ConfigMap as a start request, the same on every read (at: when its data was written), and none when there is no ConfigMap", async () => {
    expect(await kubeRolloutRequests(o())).toBeNull();
    configMap = {
      metadata: {
        name: "llm-ha-rollout",
        creationTimestamp: "2026-12-01T10:00:00Z",
        // Pulumi's last write of the data, and a label edit by someone else later.
        managedFields: [
          { manager: "pulumi-kubernetes-x", time: "2026-12-05T18:00:00Z", fieldsV1: { "f:data": { "f:id": {} } } },
          { manager: "kubectl", time: "2026-12-05T19:00:00Z", fieldsV1: { "f:metadata": { "f:labels": {} } } },
        ],
      },
      data: { id: "pulumi-0123456789ab", "to.revision": "s3://w/rev2", "to.image": NEW, by: "pulumi" },
    };
    const first = await kubeRolloutRequests(o());
    expect(first).toEqual({ op: "start", id: "pulumi-0123456789ab", at: Date.parse("2026-12-05T18:00:00Z"), to: { revision: "s3://w/rev2", image: NEW }, by: "pulumi" });
    // Read again next period: the same request (the leader acts once on it).
    expect(await kubeRolloutRequests(o())).toEqual(first);
    delete configMap.metadata.managedFields;
    expect((await kubeRolloutRequests(o()))?.at).toBe(Date.parse("2026-12-01T10:00:00Z"));
  });
  it("refuses a ConfigMap without an id or revision, naming the key", async () => {
    configMap = { metadata: { name: "llm-ha-rollout" }, data: { "to.revision": "s3://w/rev2" } };
    await expect(kubeRolloutRequests(o())).rejects.toThrow(/llm-ha\/llm-ha-rollout has no id/);
  });
});
