// Compiled by test/types.test.mjs against the package's own .d.ts (ESM resolution): the types constrain.
import { MemoryPlatform, NotFoundError, type MemoryEntry } from "memoryplatform-client";
import { memoryTools } from "memoryplatform-client/ai";
import { MemoryPlatformStore } from "memoryplatform-client/langgraph";
import { MemoryPlatformSession } from "memoryplatform-client/agents";

const mp = new MemoryPlatform("http://127.0.0.1:8000", "mp_key");
export async function used(): Promise<string> {
  const entry: MemoryEntry = await mp.upsertMemory("u", "k", { a: 1 }, { visibility: "group", ttlSeconds: 60 });
  const found: MemoryEntry[] = await mp.searchMemories("u", "q", { mode: "semantic", groupIds: ["g"] });
  // @ts-expect-error: not a search mode
  await mp.searchMemories("u", "q", { mode: "fuzzy" });
  // @ts-expect-error: a count is a number
  const count: string = await mp.countMemories("u");
  const tools = memoryTools(mp, { userId: "u" });
  const store = new MemoryPlatformStore(mp, { userIndex: 0 });
  const session = new MemoryPlatformSession(mp, "c");
  const error = new NotFoundError("no", { status: 404, code: "not_found" });
  return [entry.id, found.length, count, Object.keys(tools), store, await session.getSessionId(), error.code].join();
}
