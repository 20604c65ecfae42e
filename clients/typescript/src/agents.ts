/**
 * OpenAI Agents SDK for JS adapter (`memoryplatform-client/agents`; peer dependency `@openai/agents` or
 * `@openai/agents-core`): a `Session` over one memoryplatform conversation, as the Python client's
 * `MemoryPlatformSession`, and instructions that carry the memories an agent recalls about the user.
 *
 * Each agent uses its own key; the server does the isolation: reading the conversation's history with
 * `view=agent`, an agent gets every user message and only its own assistant messages and tool items, so two
 * agents share one conversation id. Items are stored on the `history` channel, one message per item: the
 * SDK's item as it is, in a content block `{"type": "openai_agents.item", "item": {...}}`, beside its text.
 * The conversation is append-only (it is the audit record), so `popItem` and `clearSession` hide items from
 * this agent's session (a marker in its private `memory` stream) rather than delete them.
 */

import type { AgentInputItem, Session } from "@openai/agents-core";

import { type MemoryPlatform, messageInput } from "./client.js";
import type { MemoryEntry, Message, MessageInput, Role } from "./types.js";

export const ITEM_BLOCK = "openai_agents.item";
export const MARKER_BLOCK = "openai_agents.session_marker";
const BATCH = 20; // the server's batch limit
const ROLES: Record<string, Role> = { user: "user", assistant: "assistant", system: "system", developer: "system" };

type Loose = Record<string, unknown>;

/** The readable text of an item (its string content, or its text parts), for other readers. */
function itemText(item: Loose): string {
  const content = item.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("");
  }
  return "";
}

function toMessage(item: AgentInputItem, sessionId: string): MessageInput {
  const data = item as unknown as Loose;
  const isMessage = (data.type ?? "message") === "message";
  const role: Role = isMessage ? (ROLES[String(data.role)] ?? "tool") : "tool";
  const text = itemText(data);
  return messageInput(role, [{ type: ITEM_BLOCK, item: data, ...(text ? { text } : {}) }], { sessionId });
}

function toItem(message: Message): AgentInputItem {
  for (const block of message.content) {
    if (block.type === ITEM_BLOCK && typeof block.item === "object" && block.item !== null) {
      return block.item as AgentInputItem;
    }
  }
  const text = message.content.map((block) => String(block.text ?? "")).join("");
  if (message.role === "user" || message.role === "system") return { role: message.role, content: text };
  return { role: "assistant", status: "completed", content: [{ type: "output_text", text }] };
}

export interface MemoryPlatformSessionOptions {
  /**
   * false: the session writes only the agent's own items. For a user message already in the conversation
   * (the application posted it, or another agent's session recorded it), run the agent with an empty input.
   */
  recordUserMessages?: boolean;
  /** The most items `getItems()` returns when the runner asks for all. */
  limit?: number;
}

/** The Agents SDK's `Session` over one conversation, for the agent of `client`'s key. */
export class MemoryPlatformSession implements Session {
  readonly sessionId: string;

  constructor(
    readonly client: MemoryPlatform,
    readonly conversationId: string,
    readonly options: MemoryPlatformSessionOptions = {},
  ) {
    this.sessionId = conversationId;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** From this agent's markers: the message ids popped, and the sequence number cleared through. */
  private async hidden(): Promise<{ popped: Set<string>; clearedThrough: number }> {
    const popped = new Set<string>();
    let clearedThrough = 0;
    const markers = this.client.iterMessages(this.conversationId, { channel: "memory", epoch: "all", limit: 200 });
    for await (const message of markers) {
      for (const block of message.content) {
        if (block.type !== MARKER_BLOCK) continue;
        if (block.op === "pop") popped.add(String(block.messageId));
        if (block.op === "clear") clearedThrough = Math.max(clearedThrough, Number(block.throughSeq ?? 0));
      }
    }
    return { popped, clearedThrough };
  }

  /** The agent's view of the history (every user message, its own items), minus what it hid. */
  private async visible(): Promise<Message[]> {
    const { popped, clearedThrough } = await this.hidden();
    const messages: Message[] = [];
    const history = this.client.iterMessages(this.conversationId, { channel: "history", view: "agent", limit: 200 });
    for await (const message of history) {
      if (message.seq > clearedThrough && !popped.has(message.id)) messages.push(message);
    }
    return messages;
  }

  private async mark(marker: Record<string, unknown>): Promise<void> {
    await this.client.appendMessage(this.conversationId, "system", [{ type: MARKER_BLOCK, ...marker }], {
      channel: "memory",
      sessionId: this.sessionId,
    });
  }

  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const most = limit ?? this.options.limit;
    let messages = await this.visible();
    if (most !== undefined) messages = most > 0 ? messages.slice(-most) : [];
    return messages.map(toItem);
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    const record = this.options.recordUserMessages ?? true;
    const messages = items
      .filter((item) => record || (item as Loose).role !== "user")
      .map((item) => toMessage(item, this.sessionId));
    for (let start = 0; start < messages.length; start += BATCH) {
      await this.client.appendMessages(this.conversationId, messages.slice(start, start + BATCH));
    }
  }

  async popItem(): Promise<AgentInputItem | undefined> {
    const messages = await this.visible();
    const last = messages.at(-1);
    if (!last) return undefined;
    await this.mark({ op: "pop", messageId: last.id });
    return toItem(last);
  }

  async clearSession(): Promise<void> {
    const last = (await this.visible()).at(-1);
    if (last) await this.mark({ op: "clear", throughSeq: last.seq });
  }
}

/** Recalled memories as a block of instructions: one `- key: value` line each (empty without any). */
export function formatMemories(entries: MemoryEntry[], heading = "What you know about this user:"): string {
  if (entries.length === 0) return "";
  const lines = entries.map((e) => `- ${e.key}: ${typeof e.value === "string" ? e.value : JSON.stringify(e.value)}`);
  return [heading, ...lines].join("\n");
}

/**
 * Dynamic instructions for `new Agent({ instructions })`: `instructions` followed by the memories the agent
 * recalls about `userId` at each run (its policy's order and limit, or by relevance to `q`).
 */
export function memoryInstructions(
  client: MemoryPlatform,
  userId: string,
  instructions: string,
  options: { q?: string; groupIds?: string[]; limit?: number } = {},
): () => Promise<string> {
  return async () => {
    const memories = formatMemories(await client.recallMemories(userId, options));
    return memories ? `${instructions}\n\n${memories}` : instructions;
  };
}
