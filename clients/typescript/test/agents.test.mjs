// The OpenAI Agents SDK session: a real Runner with the SDK's scripted model, two agents sharing one
// conversation against the live server, each with its own view.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Agent, Runner } from "@openai/agents-core";
import { assistantMessage, ScriptedModel } from "@openai/agents-core/testing";

import { formatMemories, memoryInstructions, MemoryPlatformSession } from "../dist/esm/agents.js";
import { fresh, team } from "./helpers.mjs";

const texts = (input) =>
  (Array.isArray(input) ? input : [input]).map((item) =>
    typeof item.content === "string" ? item.content : item.content.map((part) => part.text).join(""),
  );

test("two agents share a conversation; each model sees every user message and only its own replies", async () => {
  const { group, clients } = await team("nova", "aniza");
  const user = fresh("user");
  const conversation = await clients.nova.createConversation(user, { groupId: group });
  await clients.nova.upsertMemory(user, "language", "German", { category: "preference", visibility: "global" });
  const runner = new Runner({ tracingDisabled: true });

  const novaModel = new ScriptedModel([[assistantMessage("It ships tomorrow.")]]);
  const nova = new Agent({
    name: "nova",
    model: novaModel,
    instructions: memoryInstructions(clients.nova, user, "You are Nova."),
  });
  const first = await runner.run(nova, "Where is my order?", {
    session: new MemoryPlatformSession(clients.nova, conversation.id),
  });
  assert.equal(first.finalOutput, "It ships tomorrow.");
  assert.match(novaModel.firstCall.request.systemInstructions, /You are Nova\.\n\nWhat you know about this user:\n- language: German/);

  const anizaModel = new ScriptedModel([[assistantMessage("Refunds take five days.")]]);
  const aniza = new Agent({ name: "aniza", model: anizaModel, instructions: "You are Aniza." });
  const session = new MemoryPlatformSession(clients.aniza, conversation.id);
  await runner.run(aniza, "And the refunds?", { session });
  assert.deepEqual(texts(anizaModel.firstCall.request.input), ["Where is my order?", "And the refunds?"]);
  assert.deepEqual(texts(await session.getItems()), ["Where is my order?", "And the refunds?", "Refunds take five days."]);
  assert.deepEqual(texts(await session.getItems(1)), ["Refunds take five days."]);

  // The conversation holds all four, each under its author.
  const all = await clients.nova.listMessages(conversation.id, { channel: "history" });
  assert.deepEqual(all.data.map((m) => m.role), ["user", "assistant", "user", "assistant"]);

  // popItem and clearSession hide items from Aniza's session only; Nova's view does not change.
  const popped = await session.popItem();
  assert.deepEqual(texts(popped), ["Refunds take five days."]);
  assert.equal((await session.getItems()).length, 2);
  await session.clearSession();
  assert.deepEqual(await session.getItems(), []);
  const novaSession = new MemoryPlatformSession(clients.nova, conversation.id);
  assert.deepEqual(texts(await novaSession.getItems()), ["Where is my order?", "It ships tomorrow.", "And the refunds?"]);
  assert.equal((await clients.nova.listMessages(conversation.id, { channel: "history" })).data.length, 4);
});

test("recordUserMessages: false writes only the agent's own items", async () => {
  const { clients } = await team("nova");
  const conversation = await clients.nova.createConversation(fresh("user"));
  await clients.nova.appendMessage(conversation.id, "user", "Posted by the application");
  const model = new ScriptedModel([[assistantMessage("Seen once.")]]);
  const agent = new Agent({ name: "nova", model, instructions: "Be brief." });
  const session = new MemoryPlatformSession(clients.nova, conversation.id, { recordUserMessages: false });
  await new Runner({ tracingDisabled: true }).run(agent, [], { session });
  assert.deepEqual(texts(model.firstCall.request.input), ["Posted by the application"]);
  assert.deepEqual(texts(await session.getItems()), ["Posted by the application", "Seen once."]);
});

test("formatMemories renders one line per entry, and nothing for none", () => {
  assert.equal(formatMemories([]), "");
  assert.equal(
    formatMemories([{ key: "food", value: { likes: "sushi" } }, { key: "city", value: "Lisbon" }]),
    'What you know about this user:\n- food: {"likes":"sushi"}\n- city: Lisbon',
  );
});
