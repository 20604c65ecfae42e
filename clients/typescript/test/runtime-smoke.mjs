// Run by test/runtimes.test.mjs under Node, Deno and Bun: the ESM build against the live server, with nothing but
// the runtime's web APIs. Arguments: the server's URL, an admin key, a fresh name.
import { MemoryPlatform, NotFoundError, QueryTooLongError } from "../dist/esm/index.js";

const [url, adminKey, name] = globalThis.Deno ? globalThis.Deno.args : process.argv.slice(2);
const admin = new MemoryPlatform(url, adminKey);
await admin.createAgent(name, { displayName: name });
const agent = new MemoryPlatform(url, (await admin.createAgentKey(name)).key);
await agent.upsertMemory(`${name}/user`, "city", "Lisbon by the sea", { category: "fact" });
const [found] = await agent.searchMemories(`${name}/user`, "Lisbon", { mode: "hybrid" });
if (found?.value !== "Lisbon by the sea") throw new Error(`search found ${JSON.stringify(found)}`);
const conversation = await agent.createConversation(`${name}/user`);
await agent.appendMessage(conversation.id, "user", "hello");
const page = await agent.listMessages(conversation.id);
if (page.data[0].content[0].text !== "hello") throw new Error("the message did not come back");
const refusals = await Promise.allSettled([agent.getMemoryByKey(`${name}/user`, "none"), agent.searchMemories("u", "q".repeat(1001))]);
if (!(refusals[0].reason instanceof NotFoundError) || !(refusals[1].reason instanceof QueryTooLongError)) {
  throw new Error(`unexpected: ${refusals.map((r) => r.reason).join(", ")}`);
}
console.log(`ok ${globalThis.Deno ? "deno" : globalThis.Bun ? "bun" : "node"}`);
