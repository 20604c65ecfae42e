/**
 * Vercel AI SDK adapter (`memoryplatform-client/ai`; peer dependencies `ai` and `zod`): the memory tools of
 * one user for `generateText` / `streamText`, with zod input schemas.
 *
 * ```ts
 * const tools = memoryTools(client, { userId: "user-123" });
 * await generateText({ model, tools, prompt: "...", stopWhen: stepCountIs(3) });
 * ```
 */

import { tool } from "ai";
import { z } from "zod";

import type { MemoryPlatform } from "./client.js";
import { APIError } from "./errors.js";
import type { MemoryEntry, SearchMode, Visibility } from "./types.js";

export interface MemoryToolsOptions {
  /** The end user the memories are about. */
  userId: string;
  /** Groups to read from, and to share with when `visibility` is `"group"`. */
  groupIds?: string[];
  /** Of what `remember` writes: `"self"` (the server's default), `"group"` or `"global"`. */
  visibility?: Visibility;
  /** Of what `remember` writes when the model names none (the server's default otherwise). */
  category?: string;
  /** What `remember` writes expires after this many seconds (the server sets `validTo`). */
  ttlSeconds?: number;
  /** Recorded as each entry's source conversation. */
  conversationId?: string;
  /** Writes of one turn count together against the agent's writes-per-turn guardrail. */
  turnId?: string;
  /** `search`'s mode (`"hybrid"`: meaning and words). */
  searchMode?: SearchMode;
}

/** What the model reads of an entry: its key and value, and its category and score when there is one. */
function brief(entry: MemoryEntry) {
  return {
    key: entry.key,
    value: entry.value,
    category: entry.category,
    ...(entry.score === undefined ? {} : { score: entry.score }),
  };
}

/** A refusal of the server (a guardrail, a cap, an unknown key) as the tool's answer, for the model to read. */
async function orRefusal<T>(run: () => Promise<T>): Promise<T | { error: string; code: string }> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof APIError && error.status < 500) return { error: error.error, code: error.code };
    throw error;
  }
}

/** The tools `remember`, `recall`, `search` and `forget` over one user's memories, for the AI SDK. */
export function memoryTools(client: MemoryPlatform, options: MemoryToolsOptions) {
  const { userId, groupIds } = options;
  return {
    remember: tool({
      description:
        "Remember a fact about the user under a short key (a new value for a key replaces the old one).",
      inputSchema: z.object({
        key: z.string().min(1).describe("A short, stable name, e.g. preferred_language"),
        value: z.string().min(1).describe("What to remember"),
        category: z.string().optional().describe("e.g. preference, fact"),
      }),
      execute: ({ key, value, category }) =>
        orRefusal(async () => {
          const entry = await client.upsertMemory(userId, key, value, {
            category: category ?? options.category,
            visibility: options.visibility,
            groupIds: options.visibility === "group" ? groupIds : undefined,
            ttlSeconds: options.ttlSeconds,
            sourceConversationId: options.conversationId,
            turnId: options.turnId,
          });
          return { remembered: entry.key, id: entry.id };
        }),
    }),
    recall: tool({
      description:
        "Recall what you know about the user: the most relevant memories to a topic, or the latest ones.",
      inputSchema: z.object({
        topic: z.string().optional().describe("What the memories should be about (empty: the latest)"),
        limit: z.number().int().min(1).max(100).optional(),
      }),
      execute: ({ topic, limit }) =>
        orRefusal(async () => {
          const entries = await client.recallMemories(userId, {
            q: topic || undefined,
            limit,
            groupIds,
          });
          return { memories: entries.map(brief) };
        }),
    }),
    search: tool({
      description: "Search the user's memories by meaning and words.",
      inputSchema: z.object({
        query: z.string().min(1),
        category: z.string().optional(),
        limit: z.number().int().min(1).max(100).optional(),
      }),
      execute: ({ query, category, limit }) =>
        orRefusal(async () => {
          const entries = await client.searchMemories(userId, query, {
            mode: options.searchMode ?? "hybrid",
            category,
            limit: limit ?? 10,
            groupIds,
          });
          return { memories: entries.map(brief) };
        }),
    }),
    forget: tool({
      description: "Forget the memory stored under a key.",
      inputSchema: z.object({ key: z.string().min(1) }),
      execute: ({ key }) =>
        orRefusal(async () => {
          const entry = await client.getMemoryByKey(userId, key, { groupIds });
          await client.deleteMemory(entry.id);
          return { forgotten: key };
        }),
    }),
  };
}
