/**
 * The generator's optional L4 fallback backend, on a real HAProxy: while any inference
 * server, local or backup, is usable the fallback sees no request; once none is, every
 * request goes to it. Without `fallback` the output is byte for byte what it was.
 */
import { createServer, type Server } from "node:http";
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { runFallback } from "../../agent/src/edge/fallback/command";
import { loadFallbackConfig } from "../../agent/src/edge/fallback/config";
import { startKafkaMock } from "../../lab/engines/kafka-mock";
import { startRedisServer } from "../../lab/engines/redis-server";
import { captureLogger } from "./helpers";
import { checkHaproxyConfig, startHaproxy, type HaproxyHandle } from "../../lab/engines/haproxy";
import { HaproxyConfigError, renderHaproxyConfig, type HaproxyConfigArgs, type HaproxyProxy } from "../../contracts/haproxy-config";
import { freePort, waitFor } from "../../agent/src/util/net";

interface Fake {
  name: string;
  port: number;
  hits: number;
  server: Server;
}

async function fake(name: string, fixedPort?: number): Promise<Fake> {
  const port = fixedPort ?? (await freePort());
  const f: Fake = { name, port, hits: 0, server: createServer() };
  f.server.on("request", (req, res) => {
    if (req.url === "/health") return void res.end("ok");
    f.hits++;
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", "x-served-by": name });
      res.end(JSON.stringify({ by: name }));
    });
  });
  await new Promise<void>((r) => f.server.listen(port, "127.0.0.1", () => r()));
  return f;
}

const close = (f: Fake): Promise<void> => new Promise((r) => {
  f.server.closeAllConnections();
  f.server.close(() => r());
});

function proxy(local: Fake[], backup: Fake[], fallbackPort?: number): HaproxyProxy {
  const srv = (f: Fake) => ({ name: f.name, address: "127.0.0.1", port: f.port, agentPort: 1, httpPort: 1 });
  return {
    name: "inference",
    bind: "127.0.0.1:0",
    health: "httpchk-tuned",
    servers: { kind: "static", local: local.map(srv), backup: backup.map(srv) },
    tuning: { checkInterMs: 200, fall: 1, rise: 1 },
    ...(fallbackPort ? { fallback: { address: `127.0.0.1:${fallbackPort}` } } : {}),
  };
}

describe("fallback backend: rendering", () => {
  const base: HaproxyConfigArgs = {
    proxies: [
      { name: "inference", bind: "127.0.0.1:18080", health: "agent", forwardAzHealth: true, azHealthBind: "127.0.0.1:18081", servers: { kind: "static", local: [{ name: "n1", address: "127.0.0.1", port: 8000, agentPort: 9401, httpPort: 9400 }], backup: [{ name: "n2", address: "127.0.0.2", port: 8000, agentPort: 9401, httpPort: 9400 }] } },
      { name: "dns", bind: ":8080", health: "agent", servers: { kind: "dns", local: { prefix: "a", fqdn: "a.svc", slots: 4, port: 8000, agentPort: 9401, httpPort: 9400 }, backup: [] } },
    ],
  };

  it("leaves the output unchanged when no fallback is given", () => {
    const withUndefined = { ...base, proxies: base.proxies.map((p) => ({ ...p, fallback: undefined })) };
    expect(renderHaproxyConfig(withUndefined)).toBe(renderHaproxyConfig(base));
    expect(renderHaproxyConfig(base)).not.toContain("fallback");
  });

  it("adds only the use_backend line and the backend, for static and DNS servers", () => {
    const before = renderHaproxyConfig(base).split("\n");
    const args = { ...base, proxies: base.proxies.map((p) => ({ ...p, fallback: { address: "127.0.0.1:9410", timeoutServerMs: 30_000 } })) };
    const text = renderHaproxyConfig(args);
    const after = text.split("\n");
    // Every old line is still there, in order.
    let i = 0;
    for (const line of after) if (line === before[i]) i++;
    expect(i).toBe(before.length);
    expect(text).toContain("  use_backend inference_fallback if { nbsrv(inference_servers) eq 0 }");
    expect(text).toContain("  use_backend dns_fallback if { nbsrv(dns_servers) eq 0 }");
    expect(text).toContain("backend inference_fallback\n  mode http\n  timeout connect 1s\n  timeout server 30000ms");
    expect(text).toContain("  server fallback 127.0.0.1:9410 check");
    // The /az/health rule stays first: a zone check never reaches the fallback.
    expect(text.indexOf("use_backend inference_az_health")).toBeLessThan(text.indexOf("use_backend inference_fallback"));
    expect(checkHaproxyConfig(text)).toBeDefined();
  });

  it("refuses a fallback address that is not address:port", () => {
    expect(() => renderHaproxyConfig({ proxies: [{ ...base.proxies[0], fallback: { address: "fallback" } }] })).toThrow(HaproxyConfigError);
    expect(() => renderHaproxyConfig({ proxies: [{ ...base.proxies[0], fallback: { address: "127.0.0.1:9410", timeoutServerMs: 0 } }] })).toThrow(HaproxyConfigError);
  });
});

describe("fallback backend on a real HAProxy", () => {
  const fakes: Fake[] = [];
  let hp: HaproxyHandle | null = null;
  afterEach(async () => {
    await hp?.stop();
    hp = null;
    await Promise.all(fakes.splice(0).map(close));
  });
  afterAll(async () => {
    await hp?.stop();
  });

  it("sends nothing to the fallback while a local or backup server is up, everything once none is", async () => {
    const [local, backup, fb] = [await fake("local"), await fake("backup"), await fake("fallback")];
    fakes.push(local, backup, fb);
    const port = await freePort();
    hp = await startHaproxy({ proxies: [{ ...proxy([local], [backup], fb.port), bind: `127.0.0.1:${port}` }] });
    const send = async (): Promise<string> => {
      const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
      await r.text();
      return r.headers.get("x-served-by") ?? String(r.status);
    };
    await waitFor("local serves", async () => (await send()) === "local", { timeoutMs: 5000 });
    for (let i = 0; i < 10; i++) expect(await send()).toBe("local");

    await close(local); // local gone: the backup serves, still not the fallback
    await waitFor("backup serves", async () => (await send()) === "backup", { timeoutMs: 5000 });
    for (let i = 0; i < 10; i++) expect(await send()).toBe("backup");
    expect(fb.hits).toBe(0);

    await close(backup); // no server anywhere: L4
    const t0 = performance.now();
    await waitFor("fallback serves", async () => (await send()) === "fallback", { timeoutMs: 5000 });
    const switchMs = performance.now() - t0;
    for (let i = 0; i < 10; i++) expect(await send()).toBe("fallback");
    expect(switchMs).toBeLessThan(2000);
    fakes.splice(0, 2);

    // The local server back: traffic leaves the fallback.
    const back = await fake("local", local.port);
    fakes.push(back);
    await waitFor("local serves again", async () => (await send()) === "local", { timeoutMs: 5000 });
    const before = fb.hits;
    for (let i = 0; i < 10; i++) expect(await send()).toBe("local");
    expect(fb.hits).toBe(before);
    console.log(`fallback took over ${switchMs.toFixed(0)} ms after the last server went (check inter 200 ms fall 1)`);
  }, 30_000);
});

describe("queued results through the proxy", () => {
  it("fetches a queued request's result through HAProxy once the inference server is back, for its tenant only", async () => {
    const [redis, kafka] = await Promise.all([startRedisServer(), startKafkaMock()]);
    const r = new Redis(redis.url);
    const inference = await fake("vllm");
    let proxyHandle: HaproxyHandle | null = null;
    let back: Fake | null = null;
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    await r.hset("llmha:h:tier", { level: "L4" });
    const fb = await runFallback(loadFallbackConfig([
      "--port", "0", "--host", "127.0.0.1", "--metrics-addr", "off", "--cluster", "h", "--redis-url", redis.url, "--kafka-brokers", kafka.bootstrap,
      "--models", "m", "--l1-url", url, "--replay-rps", "50",
    ], {}), { log: captureLogger().log });
    try {
      await close(inference); // the whole fleet down: the proxy sends everything to the fallback
      proxyHandle = await startHaproxy({ proxies: [{ ...proxy([inference], [], fb.port), bind: `127.0.0.1:${port}` }] });
      const queued = await waitFor("queued through the proxy", async () => {
        const res = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "x-llmha-queue": "allow", "x-llmha-tenant": "acme" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }) });
        return res.status === 202 ? ((await res.json()) as { id: string }).id : null;
      }, { timeoutMs: 10_000, everyMs: 200 });
      // The fleet is back: the proxy sends requests to it again, and the replay goes through it.
      back = await fake("vllm", inference.port);
      await r.hset("llmha:h:tier", { level: "L0" });
      const get = (tenant: string): Promise<Response> => fetch(`${url}/v1/llmha/requests/${queued}`, { headers: { "x-llmha-tenant": tenant } });
      await waitFor("the result through the proxy", async () => (await get("acme")).status === 200, { timeoutMs: 30_000, everyMs: 250 });
      const res = await get("acme");
      expect(res.status).toBe(200);
      expect(((await res.json()) as { state: string; response: { by: string } })).toMatchObject({ state: "done", response: { by: "vllm" } });
      expect((await get("globex")).status).toBe(404);
      // The fleet serves POSTs meanwhile: only the result route went to the fallback.
      const post = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(post.headers.get("x-served-by")).toBe("vllm");
      await post.text();
    } finally {
      await proxyHandle?.stop();
      if (back) await close(back);
      await fb.close();
      r.disconnect();
      await Promise.all([redis.stop(), kafka.stop()]);
    }
  }, 60_000);
});
