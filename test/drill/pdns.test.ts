import { createServer, type Server } from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import { pdnsZoneText, startPdns, PdnsConfigError, type PdnsHandle } from "../../lab/engines/pdns";
import { freePort, waitFor } from "../../agent/src/util/net";

/** A stand-in AZ proxy answering /az/health on one loopback address; `healthy` flips its answer. */
function azHealth(address: string, port: number): Promise<{ server: Server; set(ok: boolean): void }> {
  let ok = true;
  const server = createServer((req, res) => {
    res.writeHead(req.url === "/az/health" && ok ? 200 : 503).end();
  });
  return new Promise((resolve) => server.listen(port, address, () => resolve({ server, set: (v) => (ok = v) })));
}

describe("PowerDNS LUA ifurlup (real pdns_server)", () => {
  const closers: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
  });

  it("answers every healthy AZ address and drops an AZ whose /az/health fails", async () => {
    const port = await freePort();
    const a = await azHealth("127.0.0.2", port);
    const b = await azHealth("127.0.0.3", port);
    closers.push(() => void a.server.close(), () => void b.server.close());
    const dns: PdnsHandle = await startPdns({ groups: [["127.0.0.2", "127.0.0.3"]], healthPort: port });
    closers.push(() => dns.stop());
    await waitFor("both AZs", async () => (await dns.query()).join() === "127.0.0.2,127.0.0.3", { timeoutMs: 5000, everyMs: 100 });
    a.set(false);
    const t0 = Date.now();
    await waitFor("AZ 1 gone from the answer", async () => (await dns.query()).join() === "127.0.0.3", { timeoutMs: 8000, everyMs: 50 });
    expect(Date.now() - t0).toBeLessThan(5000);
    a.set(true);
    await waitFor("AZ 1 back", async () => (await dns.query()).join() === "127.0.0.2,127.0.0.3", { timeoutMs: 8000, everyMs: 50 });
  });

  it("answers the standby group only when every active address is down", async () => {
    const port = await freePort();
    const a = await azHealth("127.0.0.2", port);
    const s = await azHealth("127.0.0.4", port);
    closers.push(() => void a.server.close(), () => void s.server.close());
    const dns = await startPdns({ groups: [["127.0.0.2"], ["127.0.0.4"]], healthPort: port });
    closers.push(() => dns.stop());
    await waitFor("active only", async () => (await dns.query()).join() === "127.0.0.2", { timeoutMs: 5000, everyMs: 100 });
    a.set(false);
    await waitFor("standby answers", async () => (await dns.query()).join() === "127.0.0.4", { timeoutMs: 8000, everyMs: 50 });
  });

  it("weighted, as Route53's weighted records: one AZ per answer by weight; a lost AZ's share spreads over the others by weight", async () => {
    const port = await freePort();
    const [a, b, c] = await Promise.all(["127.0.0.2", "127.0.0.3", "127.0.0.4"].map((ip) => azHealth(ip, port)));
    closers.push(() => void a.server.close(), () => void b.server.close(), () => void c.server.close());
    const dns = await startPdns({ weighted: [{ address: "127.0.0.2", weight: 2 }, { address: "127.0.0.3", weight: 2 }, { address: "127.0.0.4", weight: 4 }], healthPort: port });
    closers.push(() => dns.stop());
    const sample = (n: number) => dns.sample(n);
    // One address a query; `query` gathers what a crowd of resolvers sees.
    expect(Object.values(await sample(30)).reduce((a, b) => a + b, 0)).toBe(30);
    // The answers name's checks start with its first query: every AZ within a check interval or two.
    await waitFor("every AZ in the answers", async () => (await dns.query()).length === 3, { timeoutMs: 8000, everyMs: 100 });
    expect(await dns.query()).toEqual(["127.0.0.2", "127.0.0.3", "127.0.0.4"]);
    const before = await sample(400);
    expect(before["127.0.0.4"] / 400).toBeGreaterThan(0.4);
    expect(before["127.0.0.4"] / 400).toBeLessThan(0.6);
    a.set(false);
    await waitFor("AZ 1 gone from the answers", async () => !("127.0.0.2" in (await sample(40))), { timeoutMs: 8000, everyMs: 100 });
    // The failover pair this replaces sent AZ 1's whole share (25 %) to one neighbour: 50 % / 50 %.
    const after = await sample(600);
    expect(after["127.0.0.2"]).toBeUndefined();
    // What the service name may answer now, in one read: every healthy AZ, and only those.
    await waitFor("AZ 1 gone from the answers name", async () => !(await dns.query()).includes("127.0.0.2"), { timeoutMs: 8000, everyMs: 100 });
    expect(await dns.query()).toEqual(["127.0.0.3", "127.0.0.4"]);
    expect(after["127.0.0.3"] / 600).toBeGreaterThan(0.25);
    expect(after["127.0.0.3"] / 600).toBeLessThan(0.42);
    expect(after["127.0.0.4"] / 600).toBeGreaterThan(0.58);
  });

  it("serves a node record set (a headless Service) and follows setRecords at once", async () => {
    const dns = await startPdns({ groups: [["127.0.0.2"]], healthPort: await freePort(), records: { "az-a.nodes": ["127.1.0.1", "127.1.0.2"], "az-c.nodes": [] } });
    closers.push(() => dns.stop());
    expect(await dns.query("az-a.nodes.llmha.test")).toEqual(["127.1.0.1", "127.1.0.2"]);
    await expect(dns.query("az-c.nodes.llmha.test")).rejects.toThrow();
    await dns.setRecords("az-c.nodes", ["127.1.2.1"]);
    await dns.setRecords("az-a.nodes", ["127.1.0.2"]);
    // No cache in between: the next question gets the new zone.
    expect(await dns.query("az-c.nodes.llmha.test")).toEqual(["127.1.2.1"]);
    expect(await dns.query("az-a.nodes.llmha.test")).toEqual(["127.1.0.2"]);
    await dns.setRecords("az-c.nodes", []);
    await expect(dns.query("az-c.nodes.llmha.test")).rejects.toThrow();
  });
});

describe("pdnsZoneText", () => {
  it("writes the LUA ifurlup record over every group with selector all", () => {
    const z = pdnsZoneText({ groups: [["127.0.0.2", "127.0.0.3"], ["127.0.0.4"]], healthPort: 18080 });
    expect(z).toContain(
      `inference 1 IN LUA A "ifurlup('http://inference.llmha.test:18080/az/health', {{'127.0.0.2', '127.0.0.3'}, {'127.0.0.4'}}, {selector='all'})"`,
    );
  });
  it("refuses an address that is not IPv4 and an empty group", () => {
    expect(() => pdnsZoneText({ groups: [["localhost"]], healthPort: 1 })).toThrow(PdnsConfigError);
    expect(() => pdnsZoneText({ groups: [[]], healthPort: 1 })).toThrow(/at least one address/);
    expect(() => pdnsZoneText({ weighted: [{ address: "127.0.0.2", weight: 256 }], healthPort: 1 })).toThrow(/bad weight/);
    expect(pdnsZoneText({ weighted: [{ address: "127.0.0.2", weight: 96 }, { address: "127.0.0.3", weight: 48 }, { address: "127.0.0.4", weight: 0 }], healthPort: 1 })).toContain(
      "{{'127.0.0.2', '127.0.0.2', '127.0.0.3'}, {'127.0.0.4'}}, {selector='random'})",
    );
    expect(pdnsZoneText({ weighted: [{ address: "127.0.0.2", weight: 96 }, { address: "127.0.0.3", weight: 48 }, { address: "127.0.0.4", weight: 0 }], healthPort: 1 })).toContain(
      `inference-answers 1 IN LUA A "ifurlup('http://inference.llmha.test:1/az/health', {{'127.0.0.2', '127.0.0.3'}, {'127.0.0.4'}}, {selector='all'})"`,
    );
    expect(() => pdnsZoneText({ groups: [["127.0.0.2"]], healthPort: 1, records: { "az-a.nodes": ["nope"] } })).toThrow(/not an IPv4/);
    expect(() => pdnsZoneText({ groups: [["127.0.0.2"]], healthPort: 1, records: { inference: ["127.1.0.1"] } })).toThrow(/bad record name/);
  });
  it("writes each record set as plain A records with the serial", () => {
    const z = pdnsZoneText({ groups: [["127.0.0.2"]], healthPort: 1, records: { "az-a.nodes": ["127.1.0.1", "127.1.0.2"] }, serial: 7 });
    expect(z).toContain("az-a.nodes 1 IN A 127.1.0.1\naz-a.nodes 1 IN A 127.1.0.2");
    expect(z).toContain("hostmaster.llmha.test. 7 60");
  });
});
