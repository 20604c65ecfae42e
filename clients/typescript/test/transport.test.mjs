// Retries, backoff and the error mapping, against a real HTTP server with scripted answers (node:http).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import {
  APIConnectionError,
  CapacityError,
  MemoryPlatform,
  memoryInput,
  QueryTooLongError,
  RateLimitedError,
  ServerError,
  UnavailableError,
} from "../dist/esm/index.js";

let server;
let base;
const script = []; // answers to give, in order: [status, headers, body]
const seen = []; // requests received: { method, url, auth, body }

before(async () => {
  server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      seen.push({ method: request.method, url: request.url, auth: request.headers.authorization, body });
      const [status, headers, payload] = script.shift() ?? [500, {}, "no answer scripted"];
      response.writeHead(status, { "Content-Type": "application/json", ...headers });
      response.end(typeof payload === "string" ? payload : JSON.stringify(payload));
    });
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

const envelope = (code, error = "no", details = {}) => ({ error, code, details });
const reset = (...answers) => {
  script.length = 0;
  seen.length = 0;
  script.push(...answers);
};

test("a GET is retried on 503 and 429 after Retry-After, then answers", async () => {
  reset(
    [503, { "Retry-After": "0" }, envelope("unavailable")],
    [429, { "Retry-After": "0" }, envelope("rate_limited")],
    [200, {}, { userId: "u", count: 3 }],
  );
  const mp = new MemoryPlatform(base, "mp_k", { maxRetries: 2 });
  assert.equal(await mp.countMemories("u/1", { groupIds: ["a", "b"] }), 3);
  assert.equal(seen.length, 3);
  assert.equal(seen[0].url, "/usermemorystore/memories/u%2F1/count?groupId=a&groupId=b");
  assert.equal(seen[0].auth, "Bearer mp_k");
});

test("retries stop at maxRetries, with the last answer's typed error", async () => {
  reset(...Array.from({ length: 3 }, () => [503, { "Retry-After": "0" }, envelope("unavailable", "down")]));
  const mp = new MemoryPlatform(base, "k", { maxRetries: 1 });
  await assert.rejects(mp.getMe(), (error) => error instanceof UnavailableError && error.retryAfter === 0);
  assert.equal(seen.length, 2);
});

test("a POST is never retried, nor a 500", async () => {
  reset([429, { "Retry-After": "0" }, envelope("rate_limited", "slow down")]);
  const mp = new MemoryPlatform(base, "k");
  await assert.rejects(mp.appendMessage("c", "user", "hi"), RateLimitedError);
  assert.equal(seen.length, 1);
  assert.deepEqual(JSON.parse(seen[0].body), { role: "user", content: [{ type: "text", text: "hi" }] });
  reset([500, {}, envelope("server_error", "boom", { requestId: "r1" })]);
  await assert.rejects(mp.getMe(), (error) => error instanceof ServerError && error.details.requestId === "r1");
  assert.equal(seen.length, 1);
});

test("Retry-After as an HTTP date is honoured", async () => {
  const soon = new Date(Date.now() + 1500).toUTCString();
  reset([503, { "Retry-After": soon }, envelope("unavailable")], [200, {}, []]);
  const started = Date.now();
  await new MemoryPlatform(base, "k").listTools();
  const waited = Date.now() - started;
  assert.ok(waited >= 400 && waited < 3000, `waited ${waited} ms`);
});

test("the envelope maps to typed errors; a body without one keeps the status and text", async () => {
  reset([409, {}, envelope("capacity", "full", { max: 10 })], [502, {}, "<html>bad gateway</html>"]);
  const mp = new MemoryPlatform(base, "k", { maxRetries: 0 });
  await assert.rejects(mp.upsertMemory("u", "k", 1), (e) => e instanceof CapacityError && e.details.max === 10);
  await assert.rejects(
    mp.getMe(),
    (e) => e instanceof ServerError && e.status === 502 && e.code === "server_error" && e.error.includes("bad gateway"),
  );
});

test("a server that cannot be reached is an APIConnectionError after the retries", async () => {
  const mp = new MemoryPlatform("http://127.0.0.1:9", "k", { maxRetries: 1 });
  await assert.rejects(mp.getMe(), APIConnectionError);
});

test("a query longer than MAX_QUERY_CHARS is refused before it is sent", async () => {
  reset();
  const mp = new MemoryPlatform(base, "k");
  await assert.rejects(
    mp.searchMemories("u", "é".repeat(1001)),
    (e) => e instanceof QueryTooLongError && e.status === 400 && e.details.length === 1001,
  );
  assert.equal(seen.length, 0);
});

test("ttlSeconds goes out on every write: the client, the AI SDK tool and the LangGraph store", async () => {
  const entry = { id: "e1", key: "k", value: "v", userId: "u", createdAt: "2026-01-01T00:00:00Z", updatedAt: "2026-01-01T00:00:00Z" };
  reset([200, {}, entry], [200, {}, [entry]], [200, {}, entry], [200, {}, entry]);
  const mp = new MemoryPlatform(base, "k");
  await mp.upsertMemory("u", "k", "v", { ttlSeconds: 60 });
  await mp.upsertMemories([memoryInput("u", "k", "v", { ttlSeconds: 61 })]);
  const { memoryTools } = await import("../dist/esm/ai.js");
  await memoryTools(mp, { userId: "u", ttlSeconds: 62 }).remember.execute({ key: "k", value: "v" }, {});
  const { MemoryPlatformStore } = await import("../dist/esm/langgraph.js");
  await new MemoryPlatformStore(mp, { ttl: { defaultTtl: 1.05 } }).put(["u", "memories"], "k", { a: 1 }); // minutes
  const sent = seen.map((request) => JSON.parse(request.body));
  assert.deepEqual(
    [sent[0].ttlSeconds, sent[1][0].ttlSeconds, sent[2].ttlSeconds, sent[3].ttlSeconds],
    [60, 61, 62, 63],
  );
  assert.deepEqual(seen.map((request) => request.method), ["PUT", "PUT", "PUT", "PUT"]);
});
