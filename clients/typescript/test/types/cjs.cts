// The same, with CommonJS resolution (the package's require condition and dist/cjs/*.d.ts).
import { MemoryPlatform } from "memoryplatform-client";
import { MemoryPlatformStore } from "memoryplatform-client/langgraph";

const mp = new MemoryPlatform("http://127.0.0.1:8000", "mp_key");
export const store = new MemoryPlatformStore(mp);
// @ts-expect-error: the user id is a string
export const wrong = mp.listMemories(42);
