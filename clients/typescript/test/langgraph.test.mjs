// The LangGraph.js store against the live server: both namespace layouts of LangGraph's docs, search with
// a query and a filter, listNamespaces, delete.
import assert from "node:assert/strict";
import { test } from "node:test";

import { InvalidNamespaceError } from "@langchain/langgraph-checkpoint";

import { MemoryPlatformStore } from "../dist/esm/langgraph.js";
import { fresh, team } from "./helpers.mjs";

test("the docs' layout [userId, 'memories']: put, get, search, listNamespaces, delete", async () => {
  const { clients } = await team("nova");
  const store = new MemoryPlatformStore(clients.nova, { category: "fact" });
  const user = fresh("user");
  await store.put([user, "memories"], "food", { likes: "sushi", spicy: 2 });
  await store.put([user, "memories"], "drink", { likes: "green tea", spicy: 0 });
  await store.put([user, "memories", "work"], "employer", { name: "Acme / Ltd" });
  await store.put([user, "settings"], "theme", { dark: true });

  const item = await store.get([user, "memories"], "food");
  assert.deepEqual(item.namespace, [user, "memories"]);
  assert.equal(item.key, "food");
  assert.deepEqual(item.value, { likes: "sushi", spicy: 2 });
  assert.ok(item.createdAt instanceof Date);
  // The platform keeps the namespace in the key, reversibly.
  assert.equal((await clients.nova.getMemoryByKey(user, "memories/work/employer")).value.name, "Acme / Ltd");

  const found = await store.search([user, "memories"], { query: "what does the user like to eat", limit: 3 });
  assert.equal(found[0].key, "food");
  assert.ok(found.every((i) => i.namespace[1] === "memories"));
  assert.equal(typeof found[0].score, "number");
  const spicy = await store.search([user, "memories"], { filter: { spicy: { $gt: 1 } } });
  assert.deepEqual(spicy.map((i) => i.key), ["food"]);
  const prefixed = await store.search([user, "memories", "work"]);
  assert.deepEqual(prefixed.map((i) => [i.namespace, i.key]), [[[user, "memories", "work"], "employer"]]);
  assert.equal((await store.search([user], { limit: 10 })).length, 4);

  assert.deepEqual(await store.listNamespaces({ prefix: [user] }), [
    [user, "memories"],
    [user, "memories", "work"],
    [user, "settings"],
  ]);
  assert.deepEqual(await store.listNamespaces({ prefix: [user], maxDepth: 2 }), [
    [user, "memories"],
    [user, "settings"],
  ]);
  assert.deepEqual(await store.listNamespaces({ prefix: [user], suffix: ["work"] }), [[user, "memories", "work"]]);

  await store.delete([user, "memories"], "food");
  assert.equal(await store.get([user, "memories"], "food"), null);
  assert.equal(await clients.nova.countMemories(user), 3);
});

test("the layout ['memories', userId] maps onto the same user, and a namespace without one is refused", async () => {
  const { clients } = await team("nova");
  const store = new MemoryPlatformStore(clients.nova, { category: "fact" });
  const user = fresh("user");
  await store.put(["memories", user], "name", { first: "Ada" });
  const item = await store.get(["memories", user], "name");
  assert.deepEqual([item.namespace, item.value], [["memories", user], { first: "Ada" }]);
  const entry = await clients.nova.getMemoryByKey(user, "memories/name");
  assert.deepEqual(entry.value, { first: "Ada" });
  assert.deepEqual((await store.search(["memories", user])).map((i) => i.key), ["name"]);
  await assert.rejects(store.get(["memories"], "name"), InvalidNamespaceError);
  // An entry another door wrote with a plain string value reads as { value }.
  await clients.nova.upsertMemory(user, "memories/nickname", "Addie", { category: "fact" });
  assert.deepEqual((await store.get(["memories", user], "nickname")).value, { value: "Addie" });
});
