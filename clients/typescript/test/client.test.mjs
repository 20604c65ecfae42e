// The client over real HTTP against the live server that test/run.mjs started: every group of calls, with
// real keys per agent.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AuthenticationError,
  BadRequestError,
  MemoryPlatform,
  memoryInput,
  messageInput,
  NotFoundError,
  PermissionDeniedError,
} from "../dist/esm/index.js";
import { admin, fresh, team, URL } from "./helpers.mjs";

test("memories: upsert, batch, reads with every mode and filter, history, delete", async () => {
  const { group, clients } = await team("nova", "aniza");
  const { nova, aniza } = clients;
  const user = fresh("user/ü"); // a slash and unicode in the path
  const food = await nova.upsertMemory(user, "food", { likes: "sushi" }, { category: "preference" });
  assert.equal(food.key, "food");
  assert.deepEqual(food.value, { likes: "sushi" });
  await nova.upsertMemory(user, "language", "The user speaks German", {
    category: "fact",
    visibility: "global",
    confidence: 0.9,
    source: "chat",
  });
  await nova.upsertMemory(user, "ticket", "kettle replacement", { visibility: "group", groupIds: [group] });
  const batch = await nova.upsertMemories([
    memoryInput(user, "city", "Lisbon", { category: "fact" }),
    memoryInput(user, "pet", "a cat named Miso", { category: "fact" }),
  ]);
  assert.deepEqual(batch.map((e) => e.key).sort(), ["city", "pet"]);

  assert.equal(await nova.countMemories(user), 5);
  const listed = await nova.listMemories(user, { limit: 2, offset: 0 });
  assert.equal(listed.length, 2);
  assert.equal((await nova.listMemories(user, { minConfidence: 0.5 })).map((e) => e.key).join(), "language");
  const recent = await nova.recallMemories(user, { order: "most_recent", limit: 10 });
  assert.equal(recent.length, 5);
  const relevant = await nova.recallMemories(user, { q: "which language does the user speak", mode: "hybrid", limit: 1 });
  assert.equal(relevant[0].key, "language");
  for (const mode of ["keyword", "semantic", "hybrid"]) {
    const found = await nova.searchMemories(user, "German", { mode, limit: 3 });
    assert.equal(found[0].key, "language", mode);
  }
  assert.deepEqual(
    (await nova.searchMemories(user, "Lisbon", { category: "fact", mode: "keyword" })).map((e) => e.key),
    ["city"],
  );
  assert.deepEqual((await nova.listMemoriesByCategory(user, "preference")).map((e) => e.key), ["food"]);
  assert.ok((await admin().searchAllMemories("Miso")).some((e) => e.key === "pet"));

  // Aniza, in the group, sees the global entry and the group's, not Nova's own; an outsider the global one.
  assert.deepEqual((await aniza.listMemories(user)).map((e) => e.key).sort(), ["language", "ticket"]);
  const { outsider } = (await team("outsider")).clients;
  assert.deepEqual((await outsider.listMemories(user)).map((e) => e.key), ["language"]);
  assert.equal((await aniza.getMemoryByKey(user, "ticket", { groupIds: [group] })).value, "kettle replacement");
  await assert.rejects(aniza.getMemoryByKey(user, "food"), (error) => {
    assert.ok(error instanceof NotFoundError);
    assert.equal(error.status, 404);
    assert.equal(error.code, "not_found");
    return true;
  });

  await nova.upsertMemory(user, "city", "Porto", { category: "fact" });
  const city = await nova.getMemoryByKey(user, "city");
  const history = await nova.getMemoryHistory(city.id);
  assert.deepEqual(history.map((e) => e.action).sort(), ["created", "updated"]);
  await nova.deleteMemory(city.id);
  await assert.rejects(nova.getMemoryByKey(user, "city"), NotFoundError);
  assert.equal(await nova.countMemories(user), 4);
});

test("a refusal carries the envelope: a category outside the policy is a 400", async () => {
  const { clients } = await team("nova");
  await assert.rejects(
    clients.nova.upsertMemory(fresh("u"), "k", "v", { category: "not-allowed-here" }),
    (error) => error instanceof BadRequestError && error.code === "bad_request" && error.error.length > 0,
  );
});

test("conversations: create, list, messages, sync, checkpoints, context and search", async () => {
  const { group, ids, clients } = await team("nova", "aniza");
  const { nova, aniza } = clients;
  const user = fresh("user");
  const conversation = await nova.createConversation(user, { title: "order", groupId: group });
  assert.equal((await aniza.getConversation(conversation.id)).title, "order");
  const listed = [];
  for await (const c of nova.iterConversations({ userId: user, limit: 1 })) listed.push(c.id);
  assert.deepEqual(listed, [conversation.id]);

  await nova.appendMessage(conversation.id, "user", "Where is my parcel with the blue kettle?", { sessionId: "s1" });
  const appended = await nova.appendMessages(conversation.id, [
    messageInput("assistant", "It ships tomorrow."),
    messageInput("user", "Thanks!"),
  ]);
  assert.deepEqual(appended.map((m) => m.seq), [2, 3]);
  const seen = [];
  for await (const m of nova.iterMessages(conversation.id, { limit: 2 })) seen.push(m.content[0].text);
  assert.deepEqual(seen, ["Where is my parcel with the blue kettle?", "It ships tomorrow.", "Thanks!"]);
  // Aniza's own view: every user message, none of Nova's replies.
  const view = await aniza.listMessages(conversation.id, { view: "agent" });
  assert.deepEqual(view.data.map((m) => m.role), ["user", "user"]);

  const synced = await nova.syncMemory(conversation.id, [{ role: "user", content: [{ type: "text", text: "hi" }] }]);
  assert.equal(synced.noOp, false);
  assert.equal(synced.messages.length, 1);

  const summary = await aniza.appendMessage(conversation.id, "assistant", "Kettle shipped", { channel: "summary" });
  await nova.setCheckpoint(conversation.id, summary.id);
  assert.equal((await nova.getCheckpoint(conversation.id)).lastEntryId, summary.id);
  const context = await nova.getContext(conversation.id, { q: "kettle" });
  assert.equal(context.agentId, ids[0]);
  assert.equal(context.conversation.id, conversation.id);

  const hits = await nova.searchConversations("kettle", { userId: user });
  assert.equal(hits.data[0].conversationId, conversation.id);
  assert.ok(hits.data[0].score > 0);
});

test("the case log: each agent reads what the others wrote since its checkpoint", async () => {
  const { group, ids, clients } = await team("nova", "aniza");
  const { nova, aniza } = clients;
  const conversation = await nova.createConversation(fresh("user"), { groupId: group });
  await nova.checkpointAndSummarise(conversation.id, "Order A17: replacement shipped", { sessionId: "s-1" });
  const read = [];
  for await (const entry of aniza.caseLogSinceCheckpoint(conversation.id)) {
    read.push([entry.agentId, entry.content[0].text]);
  }
  assert.deepEqual(read, [[ids[0], "Order A17: replacement shipped"]]);
  for await (const entry of aniza.caseLogSinceCheckpoint(conversation.id)) assert.fail(`read twice: ${entry.id}`);
  await aniza.checkpointAndSummarise(conversation.id, "Refund approved for order A17");
  const novaReads = [];
  for await (const entry of nova.caseLogSinceCheckpoint(conversation.id)) novaReads.push(entry.content[0].text);
  assert.deepEqual(novaReads, ["Refund approved for order A17"]);
});

test("activity: tool calls reported and listed; tasks created, moved on and read", async () => {
  const { ids, clients } = await team("nova", "aniza");
  const { nova, aniza } = clients;
  const recorded = await nova.recordToolCalls([
    { tool: "lookup_order", args: { order: "A17" }, result: "shipped", durationMs: 12 },
    { tool: "refund", args: { order: "A17" }, success: false, error: "not allowed" },
  ]);
  assert.equal(recorded.length, 2);
  const failed = await admin().listToolCalls({ agentId: ids[0], success: false });
  assert.deepEqual(failed.results.map((c) => c.tool), ["refund"]);
  const all = [];
  for await (const call of admin().iterToolCalls({ agentId: ids[0], limit: 1 })) all.push(call.tool);
  assert.deepEqual(all.sort(), ["lookup_order", "refund"]);

  const task = await nova.createTask("Check the refund", { assigneeId: ids[1], context: { order: "A17" } });
  assert.equal(task.status, "pending");
  const mine = await aniza.listTasks({ assigneeId: ids[1], status: "pending" });
  assert.deepEqual(mine.results.map((t) => t.id), [task.id]);
  const done = await aniza.updateTask(task.id, { status: "done", result: { approved: true } });
  assert.equal(done.status, "done");
  assert.deepEqual((await nova.getTask(task.id)).result, { approved: true });
});

test("directory and keys: agents, groups, a key made, listed and revoked", async () => {
  const mp = admin();
  const id = fresh("agent");
  await mp.createAgent(id, { displayName: "Agent", capabilities: ["billing"] });
  await mp.updateAgent(id, { model: "gpt-test", memoryPolicy: { maxRecallEntries: 5 } });
  assert.equal((await mp.getAgent(id)).model, "gpt-test");
  assert.ok((await mp.listAgents({ capability: "billing" })).results.some((a) => a.id === id));
  const group = fresh("group");
  await mp.createGroup(group, { name: "Group" });
  await mp.addGroupMembers(group, [id]);
  assert.deepEqual((await mp.getGroup(group)).members, [id]);
  await mp.removeGroupMember(group, id);
  assert.deepEqual((await mp.getGroup(group)).members, []);
  assert.ok((await mp.listGroups({ limit: 100 })).count >= 1);

  const made = await mp.createAgentKey(id, { label: "short-lived" });
  const agent = new MemoryPlatform(URL, made.key, { maxRetries: 0 });
  assert.equal((await agent.getMe()).id, id);
  await assert.rejects(agent.createAgent(fresh("other")), PermissionDeniedError);
  assert.deepEqual((await mp.listAgentKeys(id)).results.map((k) => k.prefix), [made.prefix]);
  await mp.revokeKey(made.prefix);
  await assert.rejects(agent.getMe(), AuthenticationError);
});

test("properties, LLM tools, export and erasure", async () => {
  const { clients } = await team("nova");
  const mp = admin();
  const user = fresh("user");
  assert.deepEqual(await mp.getProperties(user), {});
  await mp.setProperties(user, { name: "Ada" });
  assert.equal((await mp.getProperties(user)).name, "Ada");
  await mp.deleteProperties(user);
  assert.deepEqual(await mp.getProperties(user), {});

  const tools = await clients.nova.listTools();
  assert.ok(tools.some((t) => t.function.name === "searchMemory"));
  await clients.nova.upsertMemory(user, "food", "sushi", { category: "preference" });
  const answer = await clients.nova.invokeTool("searchMemory", user, { query: "sushi" });
  assert.match(answer.result, /sushi/);
  const exported = await mp.exportUser(user);
  assert.ok(JSON.stringify(exported).includes("sushi"));
  await mp.eraseUser(user);
  assert.equal(await mp.countMemories(user), 0);
});

test("validTo: after it, reads no longer see the entry; its history and an asOf read still do", async () => {
  const { clients } = await team("nova");
  const { nova } = clients;
  const user = fresh("user");
  const entry = await nova.upsertMemory(user, "promo", "SPRING25", {
    category: "context",
    validTo: new Date(Date.now() + 2000).toISOString(),
  });
  assert.equal((await nova.getMemoryByKey(user, "promo")).value, "SPRING25");
  await new Promise((resolve) => setTimeout(resolve, Date.parse(entry.validTo) - Date.now() + 300));
  await assert.rejects(nova.getMemoryByKey(user, "promo"), NotFoundError);
  assert.deepEqual(await nova.listMemories(user), []);
  assert.deepEqual(await nova.searchMemories(user, "SPRING25"), []);
  const asOf = new Date((Date.parse(entry.validFrom) + Date.parse(entry.validTo)) / 2).toISOString();
  assert.deepEqual((await nova.listMemories(user, { asOf })).map((e) => e.key), ["promo"]);
  assert.equal((await nova.getMemoryHistory(entry.id))[0].action, "created");
});
