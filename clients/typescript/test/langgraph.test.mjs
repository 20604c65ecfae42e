// The LangGraph.js store against the live server: the layouts of LangGraph's docs, userIndex for the others
// and their refusal without it, search and filters and TTLs done by the server, listNamespaces' wildcards
// matched by the server, 60 puts under the default policy, and the Python store on the same namespaces.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { InvalidNamespaceError } from "@langchain/langgraph-checkpoint";

import { MemoryPlatform } from "../dist/esm/index.js";
import { MemoryPlatformStore } from "../dist/esm/langgraph.js";
import { admin, fresh, team, URL } from "./helpers.mjs";
import { ROOT } from "./server.mjs";

/** A client on a new key of `agentId` whose requests are noted: [path, URLSearchParams, items answered,
 * the answer]. */
async function recorded(agentId) {
  const { key } = await admin().createAgentKey(agentId, { label: "ts-recorded" });
  const seen = [];
  const noting = async (input, init) => {
    const response = await fetch(input, init);
    const url = new globalThis.URL(String(input));
    const body = response.headers.get("content-type") === "application/json" ? await response.clone().json() : null;
    seen.push([url.pathname, url.searchParams, Array.isArray(body) ? body.length : null, body]);
    return response;
  };
  return { client: new MemoryPlatform(URL, key, { maxRetries: 0, fetch: noting }), seen };
}

test("the docs' layouts: [userId, 'memories'] and ['memories', userId], put, get, search, delete", async () => {
  const { clients } = await team("nova");
  const store = new MemoryPlatformStore(clients.nova, { category: "fact" });
  const user = fresh("user");
  await store.put([user, "memories"], "food", { likes: "sushi", spicy: 2 });
  await store.put([user, "memories"], "drink", { likes: "green tea", spicy: 0 });
  await store.put([user, "memories", "work"], "employer", { name: "Acme / Ltd" });
  await store.put([user, "memories", "global"], "name", { first: "Ada" });
  await store.put(["memories", user], "city", { is: "Lisbon" });

  const item = await store.get([user, "memories"], "food");
  assert.deepEqual([item.namespace, item.key, item.value], [[user, "memories"], "food", { likes: "sushi", spicy: 2 }]);
  assert.ok(item.createdAt instanceof Date);
  assert.equal(await store.get([user, "memories", "global"], "food"), null); // another scope: another place
  // On the platform, as the Python store writes them: labels as the key's prefix, "global" as the scope.
  const stored = (await clients.nova.listMemories(user)).map((e) => [e.key, e.visibility]).sort();
  assert.deepEqual(stored, [
    ["memories/city", "self"], // ["memories", user] and [user, "memories"] name one place
    ["memories/drink", "self"],
    ["memories/food", "self"],
    ["memories/name", "global"],
    ["memories/work/employer", "self"],
  ]);
  assert.equal((await store.get(["memories", user], "city")).value.is, "Lisbon");

  const found = await store.search([user, "memories"], { query: "what does the user like to eat", limit: 3 });
  assert.equal(found[0].key, "food");
  assert.equal(typeof found[0].score, "number");
  assert.ok(found.every((i) => i.namespace[1] === "memories"));
  const spicy = await store.search([user, "memories"], { filter: { spicy: { $gt: 1 } } });
  assert.deepEqual(spicy.map((i) => i.key), ["food"]);
  const prefixed = await store.search([user, "memories", "work"]);
  assert.deepEqual(prefixed.map((i) => [i.namespace, i.key]), [[[user, "memories", "work"], "employer"]]);
  const global = await store.search([user, "memories", "global"]);
  assert.deepEqual(global.map((i) => [i.namespace, i.key]), [[[user, "memories", "global"], "name"]]);
  assert.deepEqual(
    (await store.search(["memories", user], { limit: 10 })).map((i) => i.key).sort(),
    ["city", "drink", "employer", "food", "name"],
  );

  assert.deepEqual(await store.listNamespaces({ prefix: [user, "memories"] }), [
    [user, "memories"],
    [user, "memories", "global"],
    [user, "memories", "work"],
  ]);
  assert.deepEqual(await store.listNamespaces({ prefix: [user, "memories"], maxDepth: 2 }), [[user, "memories"]]);
  assert.deepEqual(await store.listNamespaces({ prefix: [user, "memories"], suffix: ["work"] }), [
    [user, "memories", "work"],
  ]);

  await store.delete([user, "memories"], "food");
  assert.equal(await store.get([user, "memories"], "food"), null);
  assert.equal(await clients.nova.countMemories(user), 4);
  // An entry another door wrote with a plain string value reads as { value }.
  await clients.nova.upsertMemory(user, "memories/nickname", "Addie", { category: "fact" });
  assert.deepEqual((await store.get([user, "memories"], "nickname")).value, { value: "Addie" });
});

test("search and filter are the server's: one request each, answered with the page only", async () => {
  const { ids } = await team("nova");
  const { client, seen } = await recorded(ids[0]);
  const store = new MemoryPlatformStore(client, { category: "fact" });
  const user = fresh("user");
  await store.put([user, "memories"], "old", { kind: "trip", stars: 5 });
  for (let n = 0; n < 12; n++) await store.put([user, "memories"], `new${n}`, { kind: "chore", stars: n % 3 });
  seen.length = 0;

  const found = await store.search([user, "memories"], { filter: { kind: "trip", stars: { $gte: 4 } }, limit: 1 });
  assert.deepEqual(found.map((i) => [i.key, i.value]), [["old", { kind: "trip", stars: 5 }]]);
  const ranked = await store.search([user, "memories"], { query: "a trip", filter: { kind: "trip" }, limit: 3 });
  assert.deepEqual(ranked.map((i) => i.key), ["old"]);
  const page = await store.search([user, "memories"], { filter: { kind: "chore" }, limit: 4, offset: 2 });
  assert.deepEqual(page.map((i) => i.key), ["new9", "new8", "new7", "new6"]);

  assert.deepEqual(seen.map(([path, , items]) => [path.split("/").at(-1), items]), [
    [user, 1],
    ["search", 1],
    [user, 4],
  ]);
  const [listing, search, paged] = seen.map(([, params]) => params);
  assert.equal(listing.get("filter"), '{"kind":"trip","stars":{"$gte":4}}');
  assert.deepEqual([listing.get("keyPrefix"), listing.get("limit")], ["memories/", "1"]);
  assert.deepEqual([search.get("q"), search.get("mode"), search.get("limit")], ["a trip", "hybrid", "3"]);
  assert.equal(paged.get("offset"), "2");
});

test("a TTL per put (minutes, LangGraph's unit) and the store's default; a read renews it", async () => {
  const { clients, ids } = await team("nova");
  const { client, seen } = await recorded(ids[0]);
  const store = new MemoryPlatformStore(client, { category: "fact", ttl: { defaultTtl: 60 } });
  const user = fresh("user");
  await store.put([user, "memories"], "plan", { is: "gym" }); // the store's default: an hour
  await store.put([user, "memories"], "mood", { is: "tired" }, undefined, { ttl: 2 });
  await store.put([user, "memories"], "name", { is: "Ada" }, undefined, { ttl: null }); // none
  const lasts = async (key) => {
    const entry = await clients.nova.getMemoryByKey(user, `memories/${key}`);
    return entry.validTo && (Date.parse(entry.validTo) - Date.parse(entry.validFrom)) / 60_000;
  };
  assert.equal(await lasts("plan"), 60);
  assert.equal(await lasts("mood"), 2);
  assert.equal(await lasts("name"), null);

  // A read renews what it returns that has an end, in one request; a store told not to, never.
  const renewals = () => seen.filter(([path]) => path.endsWith("/ttl-refresh")).map(([, , , body]) => body.refreshed);
  await store.get([user, "memories"], "plan");
  await store.get([user, "memories"], "name");
  assert.deepEqual(renewals(), [1]);
  assert.equal((await store.search([user, "memories"])).length, 3);
  assert.deepEqual(renewals(), [1, 2]);
  const fixed = new MemoryPlatformStore(client, { ttl: { defaultTtl: 60, refreshOnRead: false } });
  await fixed.get([user, "memories"], "plan");
  await fixed.search([user, "memories"]);
  assert.equal(renewals().length, 2);
});

test("userIndex names the user anywhere; without it such a layout is refused, never guessed", async () => {
  const { clients } = await team("nova");
  const user = fresh("user");
  const other = fresh("user");
  const refusing = new MemoryPlatformStore(clients.nova, { category: "fact" });
  for (const hidden of [["profiles", user], ["users", user, "memories"], [user, "prefs"], [user]]) {
    await assert.rejects(refusing.put(hidden, "name", { first: "Ada" }), (error) => {
      assert.ok(error instanceof InvalidNamespaceError);
      assert.match(error.message, /userIndex: N/);
      return true;
    });
  }
  await assert.rejects(refusing.search(["profiles", user]), /userIndex/);
  await assert.rejects(refusing.listNamespaces({ prefix: ["users", user] }), /userIndex/);
  assert.equal(await clients.nova.countMemories(user), 0);
  assert.deepEqual(await clients.nova.listMemories("profiles"), []);
  assert.throws(() => new MemoryPlatformStore(clients.nova, { userIndex: -1 }), /0 or more/);

  const store = new MemoryPlatformStore(clients.nova, { category: "fact", userIndex: 1 });
  await store.put(["profiles", user], "name", { first: "Ada" });
  await store.put(["profiles", other], "name", { first: "Bo" });
  await store.put(["users", user, "memories"], "food", { likes: "soup" });
  const keys = (await clients.nova.listMemories(user)).map((e) => e.key).sort();
  assert.deepEqual(keys, ["profiles/name", "users/memories/food"]); // each user its own, not one "profiles"
  assert.deepEqual((await clients.nova.listMemories(other)).map((e) => e.key), ["profiles/name"]);
  assert.deepEqual(await clients.nova.listMemories("profiles"), []);
  assert.deepEqual((await store.get(["profiles", other], "name")).value, { first: "Bo" });
  assert.deepEqual(await store.listNamespaces({ prefix: ["users", user] }), [["users", user, "memories"]]);
  await assert.rejects(store.put(["profiles"], "name", { first: "Cy" }), /position 1 \(userIndex\)/);
});

test("listNamespaces' wildcards are matched by the server", async () => {
  const { ids } = await team("nova");
  const { client, seen } = await recorded(ids[0]);
  const store = new MemoryPlatformStore(client, { category: "fact", userIndex: 0 });
  const user = fresh("user");
  for (const namespace of [
    [user, "memories"],
    [user, "chitchat", "prefs"],
    [user, "travel", "prefs"],
    [user, "memories", "global"],
  ]) {
    await store.put(namespace, namespace.join("-"), { v: 1 });
  }
  for (let n = 0; n < 8; n++) await store.put([user, "archive", `box${n}`], "item", { v: n });
  seen.length = 0;

  assert.deepEqual(await store.listNamespaces({ prefix: [user, "*", "prefs"] }), [
    [user, "chitchat", "prefs"],
    [user, "travel", "prefs"],
  ]);
  const [, params, answered] = seen.at(-1);
  assert.deepEqual([params.getAll("keyPattern"), answered], [["*/prefs/**/*", "*"], 2]); // not the user's 12
  assert.deepEqual(await store.listNamespaces({ prefix: [user], suffix: ["*", "prefs"] }), [
    [user, "chitchat", "prefs"],
    [user, "travel", "prefs"],
  ]);
  assert.equal(seen.at(-1)[2], 2);
  assert.deepEqual(await store.listNamespaces({ prefix: [user, "*", "global"] }), [[user, "memories", "global"]]);
  assert.deepEqual(await store.listNamespaces({ prefix: [user, "*"], maxDepth: 2 }), [
    [user, "archive"],
    [user, "chitchat"],
    [user, "memories"],
    [user, "travel"],
  ]);
  assert.deepEqual(await store.listNamespaces({ prefix: [user, "archive", "*"], limit: 2, offset: 1 }), [
    [user, "archive", "box1"],
    [user, "archive", "box2"],
  ]);
  assert.deepEqual(await store.listNamespaces({ prefix: [user, "*", "nothing"] }), []);
  assert.equal(seen.at(-1)[2], 0);
  const docs = new MemoryPlatformStore(client);
  // LangGraph's docs' spelling: "memories" is a label like the others, in either place
  assert.deepEqual(await docs.listNamespaces({ prefix: ["memories", user, "*"] }), [["memories", user, "global"]]);
  assert.deepEqual(await docs.listNamespaces({ prefix: ["memories", user, "*", "prefs"] }), []);
  await assert.rejects(docs.listNamespaces({ prefix: ["*", "memories"] }), /userIndex/);
});

test("a store has no turns: 60 puts in a loop under the default policy", async () => {
  const { clients } = await team("nova");
  const store = new MemoryPlatformStore(clients.nova, { category: "fact" });
  const user = fresh("user");
  for (let n = 0; n < 60; n++) await store.put([user, "memories"], `item${n}`, { n });
  assert.equal(await clients.nova.countMemories(user), 60);
  assert.deepEqual((await store.get([user, "memories"], "item59")).value, { n: 59 });
});

/** Run the Python store (this checkout's client) against the same server with `key`: `script` gets `store`,
 * `user` and `json`, and prints what it read as JSON. */
async function python(key, user, script) {
  const env = { ...process.env, PYTHONPATH: join(ROOT, "clients", "python", "src"), MP_KEY: key, MP_USER: user };
  const prelude = [
    "import json, os",
    "from memoryplatform_client import MemoryPlatform",
    "from memoryplatform_client.langgraph import MemoryPlatformStore",
    `client = MemoryPlatform(${JSON.stringify(URL)}, os.environ["MP_KEY"], max_retries=0)`,
    "user = os.environ['MP_USER']",
  ];
  const executable = process.env.MP_PYTHON ?? join(ROOT, ".venv", "bin", "python");
  // Not execFileSync: a blocked event loop would miss the server closing its idle connections.
  const { stdout } = await promisify(execFile)(executable, ["-c", [...prelude, script].join("\n")], { env });
  return JSON.parse(stdout);
}

test("the Python and the JS store share one namespace: each reads what the other wrote", async () => {
  const { ids, clients } = await team("nova");
  const { key } = await admin().createAgentKey(ids[0], { label: "python-store" });
  const user = fresh("user");
  await python(
    key,
    user,
    [
      "store = MemoryPlatformStore(client)",
      'store.put((user, "memories"), "food", {"likes": "pizza"})',
      'store.put((user, "memories", "global"), "name", {"first": "Ada"})',
      'store.put(("memories", user), "city", "Lisbon")',
      'MemoryPlatformStore(client, user_index=1).put(("profiles", user), "tone", {"short": True}, ttl=60)',
      "print(json.dumps(True))",
    ].join("\n"),
  );
  const store = new MemoryPlatformStore(clients.nova, { category: "fact" });
  assert.deepEqual((await store.get([user, "memories"], "food")).value, { likes: "pizza" });
  assert.deepEqual((await store.get(["memories", user, "global"], "name")).value, { first: "Ada" });
  assert.deepEqual((await store.get(["memories", user], "city")).value, { value: "Lisbon" });
  const entry = await clients.nova.getMemoryByKey(user, "profiles/tone"); // its TTL as put (a store's read renews it)
  assert.equal((Date.parse(entry.validTo) - Date.parse(entry.validFrom)) / 60_000, 60);
  const profiles = new MemoryPlatformStore(clients.nova, { userIndex: 1 });
  assert.deepEqual((await profiles.get(["profiles", user], "tone")).value, { short: true });
  assert.deepEqual(await store.listNamespaces({ prefix: [user, "memories"] }), [
    [user, "memories"],
    [user, "memories", "global"],
  ]);

  await store.put([user, "memories"], "drink", { likes: "tea" });
  await profiles.put(["profiles", user], "tone", { short: false });
  const read = await python(
    key,
    user,
    [
      "store = MemoryPlatformStore(client)",
      'items = sorted((list(i.namespace), i.key, i.value) for i in store.search((user, "memories"), limit=20))',
      'tone = MemoryPlatformStore(client, user_index=1).get(("profiles", user), "tone").value',
      'print(json.dumps({"items": items, "tone": tone}))',
    ].join("\n"),
  );
  assert.deepEqual(read, {
    items: [
      [[user, "memories"], "city", "Lisbon"],
      [[user, "memories"], "drink", { likes: "tea" }],
      [[user, "memories"], "food", { likes: "pizza" }],
      [[user, "memories", "global"], "name", { first: "Ada" }],
    ],
    tone: { short: false },
  });
});

const LAYOUTS = [
  // each documented layout, with the userIndex it needs
  [(u) => [u, "memories"], undefined],
  [(u) => ["memories", u], undefined],
  [(u) => ["memories", u, "prefs"], undefined],
  [(u) => [u, "memories", "global"], undefined],
  [(u, group) => ["memories", u, "group", group], undefined],
  [(u) => ["profiles", u], 1],
  [(u) => ["users", u, "memories"], 1],
  [(u) => [u, "chitchat", "prefs"], 0],
];

test("each documented layout round-trips: put, then get and search give back its namespace", async () => {
  const { clients, group } = await team("nova");
  for (const [layout, userIndex] of LAYOUTS) {
    const user = fresh("user");
    const namespace = layout(user, group);
    const store = new MemoryPlatformStore(clients.nova, { category: "fact", userIndex });
    await store.put(namespace, "diet", { eats: "vegetables" });
    assert.deepEqual((await store.get(namespace, "diet")).namespace, namespace);
    assert.deepEqual(
      (await store.search(namespace)).map((i) => [i.namespace, i.key]),
      [[namespace, "diet"]],
    );
    if (userIndex === undefined) {
      // LangGraph's docs' two spellings name one place, each answered as asked (issue 56)
      const other = [namespace[1], namespace[0], ...namespace.slice(2)];
      assert.deepEqual(
        (await store.search(other)).map((i) => [i.namespace, i.key]),
        [[other, "diet"]],
      );
    }
  }
});

test("a word the layouts reserve where the user is, is refused, never a user", async () => {
  const { clients } = await team("nova");
  const first = new MemoryPlatformStore(clients.nova, { category: "fact", userIndex: 0 });
  const docs = new MemoryPlatformStore(clients.nova, { category: "fact" });
  for (const [store, namespace] of [
    [first, ["memories", "u-77"]],
    [first, ["global", "u-77"]],
    [first, ["group", "support"]],
    [docs, ["memories", "memories"]],
    [docs, ["memories", "global"]],
    [docs, ["group", "memories"]],
  ]) {
    await assert.rejects(store.put(namespace, "x", { v: 1 }), (error) => {
      assert.ok(error instanceof InvalidNamespaceError);
      assert.match(error.message, /reserves/);
      return true;
    });
    await assert.rejects(store.search(namespace), /reserves/);
  }
  for (const user of ["memories", "global", "group"]) {
    assert.deepEqual(await clients.nova.listMemories(user), []);
  }
});
