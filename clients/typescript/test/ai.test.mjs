// The Vercel AI SDK adapter: generateText with the SDK's mock model (ai/test), scripted to call the memory
// tools, against the live server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { memoryTools } from "../dist/esm/ai.js";
import { fresh, team } from "./helpers.mjs";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const call = (id, toolName, input) => ({ type: "tool-call", toolCallId: id, toolName, input: JSON.stringify(input) });
const turn = (content, unified) => ({ content, finishReason: { unified, raw: unified }, usage, warnings: [] });

/** A model that answers each step with the next scripted turn, and records the prompts it was given. */
function scripted(...turns) {
  const prompts = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      const next = turns.shift();
      if (!next) throw new Error("the model was called more often than scripted");
      return next;
    },
  });
  return { model, prompts };
}

test("generateText calls remember, recall, search and forget on the platform", async () => {
  const { clients } = await team("nova");
  const { nova } = clients;
  const user = fresh("user");
  const tools = memoryTools(nova, { userId: user, category: "preference" });
  assert.deepEqual(Object.keys(tools), ["remember", "recall", "search", "forget"]);
  const { model, prompts } = scripted(
    turn([call("c1", "remember", { key: "drink", value: "green tea, no sugar" })], "tool-calls"),
    turn([call("c2", "recall", { topic: "which tea the user drinks" }), call("c3", "search", { query: "tea" })], "tool-calls"),
    turn([call("c4", "forget", { key: "drink" })], "tool-calls"),
    turn([{ type: "text", text: "Noted, then forgotten." }], "stop"),
  );
  const result = await generateText({ model, tools, prompt: "I drink green tea.", stopWhen: stepCountIs(5) });

  assert.equal(result.text, "Noted, then forgotten.");
  const outputs = Object.fromEntries(result.steps.flatMap((s) => s.toolResults).map((r) => [r.toolName, r.output]));
  assert.equal(outputs.remember.remembered, "drink");
  assert.deepEqual(outputs.recall.memories.map((m) => [m.key, m.value]), [["drink", "green tea, no sugar"]]);
  assert.equal(outputs.search.memories[0].key, "drink");
  assert.deepEqual(outputs.forget, { forgotten: "drink" });
  // The model read each tool's answer in its next prompt, and the entry is gone from the platform.
  assert.match(JSON.stringify(prompts[1]), /remembered/);
  assert.equal(await nova.countMemories(user), 0);
  const history = await nova.listMemories(user);
  assert.equal(history.length, 0);
});

test("a refusal of the server is the tool's answer, for the model to read", async () => {
  const { clients } = await team("nova");
  const tools = memoryTools(clients.nova, { userId: fresh("user") });
  const { model, prompts } = scripted(
    turn([call("c1", "remember", { key: "x", value: "y", category: "secret-category" })], "tool-calls"),
    turn([call("c2", "forget", { key: "never-stored" })], "tool-calls"),
    turn([{ type: "text", text: "ok" }], "stop"),
  );
  const result = await generateText({ model, tools, prompt: "go", stopWhen: stepCountIs(4) });
  const [remember, forget] = result.steps.flatMap((s) => s.toolResults).map((r) => r.output);
  assert.equal(remember.code, "bad_request");
  assert.equal(forget.code, "not_found");
  assert.match(JSON.stringify(prompts[1]), /bad_request/);
});
