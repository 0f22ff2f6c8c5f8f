/**
 * The Kubernetes repair actuator against a fake API server on loopback: cordon is a merge patch
 * of `spec.unschedulable`, a drain evicts the inference namespace's pods on the node (DaemonSet
 * pods left) and is `pending` while a PodDisruptionBudget refuses one (HTTP 429), a restart
 * deletes only the inference pods, a reboot goes to the instance rebooter.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeRepairActuator } from "../../agent/src/fleet/actuators/repair-kube";

interface Call {
  method: string;
  path: string;
  query: Record<string, string>;
  body: unknown;
  type: string | undefined;
}

const calls: Call[] = [];
let pdbRefuses = true;
let server: Server;
let url = "";

const pods = [
  { metadata: { name: "inference-x", labels: { "app.kubernetes.io/name": "inference" }, ownerReferences: [{ kind: "ReplicaSet" }] } },
  { metadata: { name: "agent-x", ownerReferences: [{ kind: "DaemonSet" }] } },
];

async function read(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : null;
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void (async () => {
      const u = new URL(req.url ?? "/", "http://x");
      const body = await read(req);
      calls.push({ method: req.method ?? "", path: u.pathname, query: Object.fromEntries(u.searchParams), body, type: req.headers["content-type"] });
      res.setHeader("content-type", "application/json");
      if (req.method === "GET" && u.pathname === "/api/v1/namespaces/llm-ha/pods") {
        const sel = u.searchParams.get("labelSelector");
        const items = sel ? pods.filter((p) => (p.metadata as { labels?: Record<string, string> }).labels?.["app.kubernetes.io/name"] === "inference") : pods;
        res.end(JSON.stringify({ kind: "PodList", items }));
      } else if (req.method === "POST" && u.pathname.endsWith("/eviction")) {
        res.statusCode = pdbRefuses ? 429 : 201;
        res.end("{}");
      } else if (req.method === "PATCH" && u.pathname === "/api/v1/nodes/gpu-1") res.end("{}");
      else if (req.method === "DELETE") res.end("{}");
      else {
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

describe("KubeRepairActuator", () => {
  it("cordons, drains honouring PDBs, restarts the inference pods, uncordons and reboots the instance", async () => {
    const rebooted: string[] = [];
    const k = new KubeRepairActuator({ url, tokenFile: null, caFile: null, namespace: "llm-ha", rebooter: { reboot: async (id) => void rebooted.push(id) } });
    const ctx = { token: 1, reason: "t" };

    expect(await k.cordon("gpu-1", ctx)).toMatchObject({ outcome: "applied" });
    expect(calls.at(-1)).toMatchObject({ method: "PATCH", path: "/api/v1/nodes/gpu-1", body: { spec: { unschedulable: true } }, type: "application/merge-patch+json" });

    calls.length = 0;
    expect(await k.drain("gpu-1", ctx)).toMatchObject({ outcome: "pending", detail: expect.stringContaining("PodDisruptionBudget") });
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(["GET /api/v1/namespaces/llm-ha/pods", "POST /api/v1/namespaces/llm-ha/pods/inference-x/eviction"]);
    expect(calls[0].query.fieldSelector).toBe("spec.nodeName=gpu-1");
    expect(calls[1].body).toEqual({ apiVersion: "policy/v1", kind: "Eviction", metadata: { name: "inference-x", namespace: "llm-ha" } });
    pdbRefuses = false;
    expect(await k.drain("gpu-1", ctx)).toMatchObject({ outcome: "applied" });

    calls.length = 0;
    expect(await k.restart("gpu-1", ctx)).toMatchObject({ outcome: "applied" });
    expect(calls[0].query.labelSelector).toBe("app.kubernetes.io/name=inference");
    expect(calls.filter((c) => c.method === "DELETE").map((c) => c.path)).toEqual(["/api/v1/namespaces/llm-ha/pods/inference-x"]);

    expect(await k.uncordon("gpu-1", ctx)).toMatchObject({ outcome: "applied" });
    expect(calls.at(-1)?.body).toEqual({ spec: { unschedulable: null } });

    expect(await k.reboot("i-0123456789abcdef0", ctx)).toMatchObject({ outcome: "applied" });
    expect(rebooted).toEqual(["i-0123456789abcdef0"]);
    expect(await k.reboot("gpu-1", ctx)).toMatchObject({ outcome: "failed" });
    expect(await k.cordon("gpu-2", ctx)).toMatchObject({ outcome: "failed", detail: expect.stringContaining("HTTP 404") });
  });
});
