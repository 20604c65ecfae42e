/**
 * The client: one method per API call, named as in the Python client (`search_memories` is
 * `searchMemories`), each taking the server's field names as options and returning the server's JSON.
 */

import { type Call, checkedQuery, type ClientOptions, compact, type QueryValue, segment, Transport } from "./core.js";
import { ConflictError } from "./errors.js";
import type * as o from "./options.js";
import type {
  Agent,
  ApiKey,
  ChangeEventPage,
  Checkpoint,
  ContentBlock,
  Context,
  Conversation,
  EnsuredAgent,
  ExtractMessage,
  Extraction,
  Group,
  MemoryEntry,
  MemoryEvent,
  MemoryInput,
  Message,
  MessageInput,
  MessageSearchResult,
  OffsetPage,
  Page,
  Role,
  SyncMessage,
  SyncResult,
  Task,
  Tool,
  ToolCall,
  ToolCallInput,
  ToolCallPage,
  ToolResult,
} from "./types.js";

const MEMORIES = "/usermemorystore/memories";
const CONVERSATIONS = "/v1/conversations";

const user = (userId: string) => `${MEMORIES}/${segment(userId)}`;
const conversation = (conversationId: string) => `${CONVERSATIONS}/${segment(conversationId)}`;

/** A list's, a search's and a recall's narrowing as sent: `filter` as compact JSON (`?filter={...}`). */
function narrowed<T extends { filter?: Record<string, unknown> }>(options: T): Record<string, QueryValue> {
  const { filter, ...rest } = options;
  return { ...(rest as Record<string, QueryValue>), filter: filter === undefined ? undefined : JSON.stringify(filter) };
}

/** Content blocks: a plain string becomes one `{"type": "text", "text": ...}` block. */
export function textContent(content: string | ContentBlock[]): ContentBlock[] {
  return typeof content === "string" ? [{ type: "text", text: content }] : content;
}

/** The wire shape of one upsert, for {@link MemoryPlatform.upsertMemories}. */
export function memoryInput(userId: string, key: string, value: unknown, options: o.UpsertOptions = {}): MemoryInput {
  return { userId, key, value, ...compact({ ...options }) };
}

/** The wire shape of one message, for {@link MemoryPlatform.appendMessages}. */
export function messageInput(
  role: Role,
  content: string | ContentBlock[],
  options: o.MessageOptions = {},
): MessageInput {
  return { role, content: textContent(content), ...compact({ ...options }) };
}

/**
 * A memoryplatform client for one key; the key decides who the caller is (an agent, a viewer, an admin).
 * Idempotent calls (GET, PUT, DELETE) are retried on 429, 503 and connection errors.
 *
 * ```ts
 * const mp = new MemoryPlatform("http://127.0.0.1:8000", apiKey);
 * ```
 */
export class MemoryPlatform {
  readonly transport: Transport;

  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    this.transport = new Transport(baseUrl, apiKey, options);
  }

  send<T>(call: Call<T>): Promise<T> {
    return this.transport.send(call);
  }

  /** `GET /healthz`: the server answers (`{"status": "ok", ...}`, as the server reports it). */
  health(): Promise<Record<string, unknown>> {
    return this.send({ method: "GET", path: "/healthz" });
  }

  // --- Memories ---------------------------------------------------------------------------------------

  upsertMemory(userId: string, key: string, value: unknown, options: o.UpsertOptions = {}): Promise<MemoryEntry> {
    return this.send({ method: "PUT", path: MEMORIES, body: memoryInput(userId, key, value, options) });
  }

  /** Up to 100 entries, all or nothing (build them with {@link memoryInput}). */
  upsertMemories(entries: MemoryInput[]): Promise<MemoryEntry[]> {
    return this.send({ method: "PUT", path: `${MEMORIES}/batch`, body: entries });
  }

  listMemories(userId: string, options: o.ListOptions = {}): Promise<MemoryEntry[]> {
    const { groupIds, ...rest } = options;
    return this.send({ method: "GET", path: user(userId), query: { ...narrowed(rest), groupId: groupIds } });
  }

  /** Recall (`/visible`): the policy's order and limit, or by relevance to `q` when given. */
  async recallMemories(userId: string, options: o.RecallOptions = {}): Promise<MemoryEntry[]> {
    const { groupIds, q, ...rest } = options;
    return this.send({
      method: "GET",
      path: `${user(userId)}/visible`,
      query: { ...narrowed(rest), groupId: groupIds, q: checkedQuery(q) },
    });
  }

  /** By meaning and words (`mode` `hybrid`) unless `mode` says otherwise, as in the Python client. */
  async searchMemories(userId: string, q: string, options: o.SearchOptions = {}): Promise<MemoryEntry[]> {
    const { groupIds, mode = "hybrid", ...rest } = options;
    return this.send({
      method: "GET",
      path: `${user(userId)}/search`,
      query: { q: checkedQuery(q), mode, ...narrowed(rest), groupId: groupIds },
    });
  }

  /** Every user's memories this key may read (`/v1/memories/search`). */
  async searchAllMemories(q: string, options: o.SearchAllOptions = {}): Promise<MemoryEntry[]> {
    return this.send({ method: "GET", path: "/v1/memories/search", query: { q: checkedQuery(q), ...options } });
  }

  listMemoriesByCategory(userId: string, category: string, options: o.CategoryOptions = {}): Promise<MemoryEntry[]> {
    const { groupIds, ...rest } = options;
    return this.send({
      method: "GET",
      path: `${user(userId)}/category/${segment(category)}`,
      query: { ...rest, groupId: groupIds },
    });
  }

  getMemoryByKey(userId: string, key: string, options: o.ReadOptions = {}): Promise<MemoryEntry> {
    const { groupIds, ...rest } = options;
    return this.send({
      method: "GET",
      path: `${user(userId)}/key/${segment(key)}`,
      query: { ...rest, groupId: groupIds },
    });
  }

  async countMemories(userId: string, options: o.ReadOptions = {}): Promise<number> {
    const { groupIds, ...rest } = options;
    const answer = await this.send<{ count: number }>({
      method: "GET",
      path: `${user(userId)}/count`,
      query: { ...rest, groupId: groupIds },
    });
    return answer.count;
  }

  /**
   * Renew the TTL of these entries (those the key reads): each is valid for its TTL again from now. Resolves to
   * how many were renewed (entries without a TTL, or expired, are not).
   */
  async refreshTtl(userId: string, entryIds: string[], options: { groupIds?: string[] } = {}): Promise<number> {
    const answer = await this.send<{ refreshed: number }>({
      method: "POST",
      path: `${user(userId)}/ttl-refresh`,
      body: compact({ ids: entryIds, groupIds: options.groupIds }),
    });
    return answer.refreshed;
  }

  /**
   * Extract facts about the user from `messages` (`[{role, content}]`, at most 50) with the server's LLM: each
   * is added, updated (the old value stays in history) or left as it is, decided by the server; one older than
   * the stored value is skipped. Without `messages` (`null`), `conversationId` reads the conversation's stored
   * messages this agent has not extracted yet. `dryRun: true` shows the operations and writes nothing.
   */
  extract(userId: string, messages: ExtractMessage[] | null = null, options: o.ExtractOptions = {}): Promise<Extraction> {
    return this.send({
      method: "POST",
      path: `${user(userId)}/extract`,
      body: compact({ messages: messages ?? undefined, ...options }),
    });
  }

  deleteMemory(entryId: string): Promise<void> {
    return this.send({ method: "DELETE", path: `${MEMORIES}/entry/${segment(entryId)}` });
  }

  getMemoryHistory(entryId: string): Promise<MemoryEvent[]> {
    return this.send({ method: "GET", path: `${MEMORIES}/entry/${segment(entryId)}/history` });
  }

  // --- GDPR and legacy properties ----------------------------------------------------------------------

  /** Admin keys: everything stored about a user. */
  exportUser(userId: string): Promise<Record<string, unknown>> {
    return this.send({ method: "GET", path: `${user(userId)}/export` });
  }

  /** Admin keys: erase a user (GDPR). */
  eraseUser(userId: string): Promise<Record<string, unknown>> {
    return this.send({ method: "DELETE", path: user(userId) });
  }

  async getProperties(userId: string): Promise<Record<string, unknown>> {
    const properties = await this.send<Record<string, unknown> | undefined>({
      method: "GET",
      path: `/propertiesstore/properties/${segment(userId)}`,
    });
    return properties ?? {}; // 204: no properties
  }

  setProperties(userId: string, properties: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.send({ method: "POST", path: `/propertiesstore/properties/${segment(userId)}`, body: properties });
  }

  deleteProperties(userId: string): Promise<void> {
    return this.send({ method: "DELETE", path: `/propertiesstore/properties/${segment(userId)}` });
  }

  // --- Conversations -----------------------------------------------------------------------------------

  createConversation(userId: string, options: { title?: string; groupId?: string } = {}): Promise<Conversation> {
    return this.send({ method: "POST", path: CONVERSATIONS, body: compact({ userId, ...options }) });
  }

  listConversations(options: o.ConversationListOptions = {}): Promise<Page<Conversation>> {
    return this.send({ method: "GET", path: CONVERSATIONS, query: { ...options } });
  }

  /** Every conversation, page after page. */
  async *iterConversations(options: o.ConversationListOptions = {}): AsyncGenerator<Conversation> {
    let after = options.after;
    while (true) {
      const page = await this.listConversations({ ...options, after });
      yield* page.data;
      if (page.nextCursor === null) return;
      after = page.nextCursor;
    }
  }

  getConversation(conversationId: string): Promise<Conversation> {
    return this.send({ method: "GET", path: conversation(conversationId) });
  }

  /** Full-text search over the messages this key may read (`/v1/conversations/search`). */
  async searchConversations(q: string, options: o.ConversationSearchOptions = {}): Promise<Page<MessageSearchResult>> {
    return this.send({
      method: "GET",
      path: `${CONVERSATIONS}/search`,
      query: { q: checkedQuery(q), ...options },
    });
  }

  appendMessage(
    conversationId: string,
    role: Role,
    content: string | ContentBlock[],
    options: o.MessageOptions = {},
  ): Promise<Message> {
    return this.send({
      method: "POST",
      path: `${conversation(conversationId)}/messages`,
      body: messageInput(role, content, options),
    });
  }

  /** At most 20, all or nothing (build them with {@link messageInput}). */
  async appendMessages(
    conversationId: string,
    messages: MessageInput[],
    options: { sessionId?: string } = {},
  ): Promise<Message[]> {
    const answer = await this.send<{ data: Message[] }>({
      method: "POST",
      path: `${conversation(conversationId)}/messages`,
      body: compact({ messages, sessionId: options.sessionId }),
    });
    return answer.data;
  }

  listMessages(conversationId: string, options: o.MessageListOptions = {}): Promise<Page<Message>> {
    return this.send({ method: "GET", path: `${conversation(conversationId)}/messages`, query: { ...options } });
  }

  /** Every message after `after` (or from the start), page after page, in sequence order. */
  async *iterMessages(conversationId: string, options: o.MessageListOptions = {}): AsyncGenerator<Message> {
    let after = options.after;
    while (true) {
      const page = await this.listMessages(conversationId, { ...options, after });
      yield* page.data;
      if (page.nextCursor === null) return;
      after = page.nextCursor;
    }
  }

  syncMemory(conversationId: string, messages: SyncMessage[], options: { sessionId?: string } = {}): Promise<SyncResult> {
    return this.send({
      method: "POST",
      path: `${conversation(conversationId)}/memory/messages/sync`,
      body: compact({ messages, sessionId: options.sessionId }),
    });
  }

  getCheckpoint(conversationId: string, options: { agentId?: string } = {}): Promise<Checkpoint> {
    return this.send({ method: "GET", path: `${conversation(conversationId)}/checkpoint`, query: { ...options } });
  }

  setCheckpoint(conversationId: string, lastEntryId: string): Promise<Checkpoint> {
    return this.send({ method: "PUT", path: `${conversation(conversationId)}/checkpoint`, body: { lastEntryId } });
  }

  async getContext(conversationId: string, options: { agentId?: string; q?: string } = {}): Promise<Context> {
    return this.send({
      method: "GET",
      path: `${conversation(conversationId)}/context`,
      query: { agentId: options.agentId, q: checkedQuery(options.q) },
    });
  }

  // --- The case log (seed 003) ---------------------------------------------------------------------------

  /**
   * Append `summary` to the case log (the shared `summary` channel) and move the caller's checkpoint to it:
   * everything up to and including the summary counts as read (read {@link caseLogSinceCheckpoint} first).
   */
  async checkpointAndSummarise(
    conversationId: string,
    summary: string | ContentBlock[],
    options: { sessionId?: string } = {},
  ): Promise<Message> {
    const entry = await this.appendMessage(conversationId, "assistant", summary, { channel: "summary", ...options });
    await this.setCheckpoint(conversationId, entry.id);
    return entry;
  }

  /**
   * The case-log entries after the caller's checkpoint, in order. An entry is marked read (the checkpoint
   * moves to it) when the next one is asked for or the log ends: at least once, never lost.
   */
  async *caseLogSinceCheckpoint(conversationId: string, options: { pageSize?: number } = {}): AsyncGenerator<Message> {
    const after = (await this.getCheckpoint(conversationId)).lastEntryId ?? undefined;
    const entries = this.iterMessages(conversationId, { channel: "summary", limit: options.pageSize ?? 50, after });
    for await (const entry of entries) {
      yield entry;
      await this.setCheckpoint(conversationId, entry.id);
    }
  }

  // --- Activity: tool calls and tasks ----------------------------------------------------------------------

  /** Report tool calls the agent made (up to the server's batch limit); never retried. */
  async recordToolCalls(calls: ToolCallInput[]): Promise<ToolCall[]> {
    const answer = await this.send<{ calls: ToolCall[] }>({
      method: "POST",
      path: "/v1/activity/tool-calls",
      body: { calls },
    });
    return answer.calls;
  }

  /**
   * Memory events after `after`, oldest first: an agent key those about entries it may read. The cursor
   * never skips an event; keep `next` and pass it as `after` next time.
   */
  listEvents(options: o.EventListOptions = {}): Promise<ChangeEventPage> {
    const { types, ...rest } = options;
    const query = types && types.length ? { ...rest, types: types.join(",") } : rest;
    return this.send({ method: "GET", path: "/v1/events", query });
  }

  listToolCalls(options: o.ToolCallListOptions = {}): Promise<ToolCallPage> {
    return this.send({ method: "GET", path: "/v1/activity/tool-calls", query: { ...options } });
  }

  /** Every tool call, newest first, page after page. */
  async *iterToolCalls(options: o.ToolCallListOptions = {}): AsyncGenerator<ToolCall> {
    let after = options.after;
    while (true) {
      const page = await this.listToolCalls({ ...options, after });
      yield* page.results;
      if (page.next === null) return;
      after = page.next;
    }
  }

  createTask(title: string, options: o.TaskCreateOptions = {}): Promise<Task> {
    return this.send({ method: "POST", path: "/v1/tasks", body: compact({ title, ...options }) });
  }

  listTasks(options: o.TaskListOptions = {}): Promise<OffsetPage<Task>> {
    return this.send({ method: "GET", path: "/v1/tasks", query: { ...options } });
  }

  getTask(taskId: string): Promise<Task> {
    return this.send({ method: "GET", path: `/v1/tasks/${segment(taskId)}` });
  }

  /** Move a task on (`status`) and set its `result`; a PATCH, never retried. */
  updateTask(taskId: string, update: o.TaskUpdate): Promise<Task> {
    return this.send({ method: "PATCH", path: `/v1/tasks/${segment(taskId)}`, body: compact({ ...update }) });
  }

  // --- Agents, groups and keys ---------------------------------------------------------------------------

  getMe(): Promise<Agent> {
    return this.send({ method: "GET", path: "/v1/agents/me" });
  }

  listAgents(options: o.AgentListOptions = {}): Promise<OffsetPage<Agent>> {
    return this.send({ method: "GET", path: "/v1/agents", query: { ...options } });
  }

  createAgent(agentId: string, options: o.AgentFields & { groups?: string[] } = {}): Promise<Agent> {
    return this.send({ method: "POST", path: "/v1/agents", body: compact({ id: agentId, ...options }) });
  }

  /**
   * Get or create (admin keys): the agent `agentId`, created with these fields when it does not exist yet,
   * and whether this call created it. No check-then-insert: it creates, and on the server's 409 (the id is
   * taken, by an earlier call or a concurrent one) reads the existing agent, whose fields stay as they are.
   */
  async ensureAgent(agentId: string, options: o.AgentFields & { groups?: string[] } = {}): Promise<EnsuredAgent> {
    try {
      return { agent: await this.createAgent(agentId, options), created: true };
    } catch (error) {
      if (!(error instanceof ConflictError) || error.code !== "conflict") throw error;
      return { agent: await this.getAgent(agentId), created: false };
    }
  }

  getAgent(agentId: string): Promise<Agent> {
    return this.send({ method: "GET", path: `/v1/agents/${segment(agentId)}` });
  }

  updateAgent(agentId: string, fields: o.AgentFields & { memoryPolicy?: Record<string, unknown> }): Promise<Agent> {
    return this.send({ method: "PATCH", path: `/v1/agents/${segment(agentId)}`, body: compact({ ...fields }) });
  }

  listGroups(options: o.PageOptions = {}): Promise<OffsetPage<Group>> {
    return this.send({ method: "GET", path: "/v1/groups", query: { ...options } });
  }

  createGroup(groupId: string, options: { name?: string; members?: string[] } = {}): Promise<Group> {
    return this.send({ method: "POST", path: "/v1/groups", body: compact({ id: groupId, ...options }) });
  }

  getGroup(groupId: string): Promise<Group> {
    return this.send({ method: "GET", path: `/v1/groups/${segment(groupId)}/members` });
  }

  addGroupMembers(groupId: string, agentIds: string[]): Promise<Group> {
    return this.send({ method: "POST", path: `/v1/groups/${segment(groupId)}/members`, body: { agentIds } });
  }

  removeGroupMember(groupId: string, agentId: string): Promise<void> {
    return this.send({ method: "DELETE", path: `/v1/groups/${segment(groupId)}/members/${segment(agentId)}` });
  }

  /** An `agent` key for the agent; the raw key is in `.key` of this answer only. */
  createAgentKey(agentId: string, options: { label?: string; expiresAt?: string } = {}): Promise<ApiKey> {
    return this.send({ method: "POST", path: `/v1/agents/${segment(agentId)}/keys`, body: compact({ ...options }) });
  }

  listAgentKeys(agentId: string, options: o.PageOptions = {}): Promise<OffsetPage<ApiKey>> {
    return this.send({ method: "GET", path: `/v1/agents/${segment(agentId)}/keys`, query: { ...options } });
  }

  revokeKey(prefix: string): Promise<void> {
    return this.send({ method: "DELETE", path: `/v1/keys/${segment(prefix)}` });
  }

  // --- LLM tools -----------------------------------------------------------------------------------------

  listTools(): Promise<Tool[]> {
    return this.send({ method: "GET", path: "/v1/tools" });
  }

  /** Run one of the server's LLM tools; a refusal comes back as the tool's text, for the LLM to read. */
  invokeTool(name: string, userId: string, args: Record<string, unknown>, context: o.ToolContext = {}): Promise<ToolResult> {
    return this.send({
      method: "POST",
      path: `/v1/tools/${segment(name)}/invoke`,
      body: { userId, arguments: args, ...compact({ ...context }) },
    });
  }
}
