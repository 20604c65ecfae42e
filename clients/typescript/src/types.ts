/**
 * The API's shapes, with the server's own (camelCase) field names: the JSON objects the server sends, as in
 * the Python client's `memoryplatform_client.types` and the OpenAPI schema at `/api/schema/`.
 */

export type Visibility = "self" | "group" | "global";
export type SearchMode = "keyword" | "semantic" | "hybrid";
/** Recall by relevance (`q` on recall). */
export type RankedMode = "semantic" | "hybrid";
export type RecallOrder = "most_recent" | "most_accessed";
export type Channel = "history" | "memory" | "summary";
export type Role = "user" | "assistant" | "system" | "tool";
export type TaskStatus = "pending" | "in_progress" | "done" | "failed" | "cancelled";
export type AgentStatus = "active" | "idle" | "unavailable";
export type ContentBlock = { type: string; text?: string; [field: string]: unknown };
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

export interface MemoryEntry {
  id: string;
  userId: string;
  key: string;
  value: unknown;
  category: string;
  visibility: Visibility;
  sourceAgentId: string | null;
  groupIds: string[];
  sourceConversationId: string | null;
  conflicted: boolean;
  accessCount: number;
  createdAt: string;
  updatedAt: string;
  lastAccessedAt: string | null;
  validFrom: string;
  validTo: string | null;
  supersededBy: string | null;
  confidence: number | null;
  source: string | null;
  /** Semantic and hybrid search, and recall by relevance, only. */
  score?: number;
}

/** One entry to upsert (`PUT /usermemorystore/memories` and `/batch`). */
export interface MemoryInput {
  userId: string;
  key: string;
  value: unknown;
  category?: string;
  visibility?: Visibility;
  sourceAgentId?: string | null;
  groupIds?: string[] | null;
  sourceConversationId?: string | null;
  turnId?: string | null;
  /** The end of the entry's validity (ISO 8601): after it, reads no longer see it; it stays in history. */
  validTo?: string | null;
  /** A time to live: the server sets `validTo` to now plus this many seconds. */
  ttlSeconds?: number | null;
  confidence?: number | null;
  source?: string | null;
  /** When what the value says was observed (ISO 8601; default: the write's time). */
  observedAt?: string | null;
}

/**
 * One message given to extraction: `role` (user, assistant, system, tool), `content`, and an optional `id`
 * recorded in each fact's provenance.
 */
export interface ExtractMessage {
  role: string;
  content: string;
  id?: string;
}

/**
 * What extraction did with one proposed fact: `op` is ADD, UPDATE, NOOP, REJECTED or SKIPPED (time order: the
 * stored value was observed after the fact's message; `observedAt` and `storedObservedAt` say when).
 */
export interface ExtractOperation {
  op: string;
  key: string;
  value?: string;
  category?: string;
  confidence?: number;
  sources?: unknown[];
  entryId?: string | null;
  matchedBy?: string;
  previousValue?: unknown;
  visibility?: string;
  groupIds?: string[];
  reason?: string;
  observedAt?: string | null;
  storedObservedAt?: string;
}

export interface Extraction {
  userId: string;
  agentId: string;
  conversationId: string | null;
  dryRun: boolean;
  model: string;
  promptVersion: string;
  cost: number;
  added: number;
  updated: number;
  unchanged: number;
  rejected: number;
  skipped: number;
  messages: number;
  /** The messages named that this agent extracted before: left out. */
  alreadyExtracted: string[];
  operations: ExtractOperation[];
}

export interface MemoryEvent {
  id: string;
  entryId: string | null;
  userId: string;
  key?: string;
  action: string;
  actorType: string;
  actorId: string;
  keyPrefix: string;
  oldValue: unknown;
  newValue: unknown;
  oldValueHidden: boolean;
  newValueHidden: boolean;
  createdAt: string;
}

export interface Conversation {
  id: string;
  userId: string;
  groupId: string | null;
  title: string;
  createdAt: string;
}

export interface Message {
  id: string;
  conversationId: string;
  seq: number;
  channel: Channel;
  role: Role;
  agentId: string | null;
  memoryEpoch: number | null;
  content: ContentBlock[];
  sessionId: string | null;
  createdAt: string;
}

export interface MessageSearchResult extends Message {
  userId: string;
  score: number;
}

export interface MessageInput {
  role: Role;
  content: ContentBlock[];
  channel?: Channel;
  sessionId?: string | null;
  memoryEpoch?: number | null;
}

export interface SyncMessage {
  role: Role;
  content: ContentBlock[];
}

/** A cursor page: pass `nextCursor` as `after` for the next one (null when nothing more follows). */
export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

/** A limit/offset page of the directory and the tasks: `count`, `next`, `previous` and `results`. */
export interface OffsetPage<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

export interface SyncResult {
  memoryEpoch: number | null;
  noOp: boolean;
  epochIncremented: boolean;
  messages: Message[];
}

export interface Checkpoint {
  conversationId: string;
  agentId: string;
  lastEntryId: string | null;
  updatedAt: string | null;
}

export interface Context {
  conversation: Conversation;
  agentId: string;
  memory: { memoryEpoch: number | null; messages: Message[] };
  caseLog: { checkpoint: string | null; data: Message[]; nextCursor: string | null };
  history: Message[];
  userMemories: MemoryEntry[];
}

export interface Agent {
  id: string;
  displayName: string;
  capabilities?: string[];
  model?: string;
  status?: AgentStatus;
  groups: string[];
  lastActiveAt: string | null;
  createdAt: string;
  updatedAt: string;
  memoryPolicy?: Record<string, unknown>;
}

/** What {@link MemoryPlatform.ensureAgent} answers: the agent, and whether this call created it. */
export interface EnsuredAgent {
  agent: Agent;
  created: boolean;
}

export interface Group {
  id: string;
  name: string;
  members: string[];
  createdAt: string;
}

export interface ApiKey {
  prefix: string;
  role: "agent" | "viewer" | "admin";
  agentId: string | null;
  label: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  /** The raw key: only in the answer that made it. */
  key?: string;
}

export interface Tool {
  type: string;
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface ToolResult {
  result: string;
}

export interface Task {
  id: string;
  title: string;
  creatorId: string;
  assigneeId: string;
  userId: string | null;
  context: unknown;
  status: TaskStatus;
  result: unknown;
  visibility: Visibility;
  groupIds: string[];
  memoryEntryId: string | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

/** One tool call as the agent reports it (`POST /v1/activity/tool-calls`). */
export interface ToolCallInput {
  tool: string;
  args?: unknown;
  result?: unknown;
  success?: boolean;
  durationMs?: number | null;
  error?: string | null;
  taskId?: string | null;
  conversationId?: string | null;
  sessionId?: string | null;
  createdAt?: string | null;
}

export interface ToolCall {
  id: string;
  agentId: string;
  tool: string;
  args: unknown;
  result: unknown;
  success: boolean;
  durationMs: number | null;
  error: string;
  taskId: string | null;
  conversationId: string | null;
  sessionId: string | null;
  via: "rest" | "llm_tool" | "mcp";
  createdAt: string;
}

/** A page of the activity log: pass `next` as `after` for the next one (null when nothing more follows). */
export interface ToolCallPage {
  results: ToolCall[];
  next: string | null;
}

/**
 * A memory event: what the change feed lists and a webhook receives. `value`/`oldValue` are null when the
 * reader may not see them; a `user.erased` event holds `id`, `type`, `occurredAt` and `userId` only.
 */
export interface ChangeEvent {
  id: string;
  type: string;
  occurredAt: string;
  userId: string;
  key?: string | null;
  entryId?: string | null;
  visibility?: string;
  groupIds?: string[];
  sourceAgent?: string | null;
  value?: unknown;
  oldValue?: unknown;
  valueHidden?: boolean;
  data?: Record<string, unknown> | null;
}

/** Events oldest first; pass `next` as `after` for the next page (the same cursor when none came). */
export interface ChangeEventPage {
  results: ChangeEvent[];
  next: string;
}
