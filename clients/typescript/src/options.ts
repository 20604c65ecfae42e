/** The options of the client's calls: the server's query and body field names, in camelCase. */

import type {
  AgentStatus,
  Channel,
  RankedMode,
  RecallOrder,
  SearchMode,
  TaskStatus,
  Visibility,
} from "./types.js";

export interface UpsertOptions {
  category?: string;
  visibility?: Visibility;
  sourceAgentId?: string;
  groupIds?: string[];
  sourceConversationId?: string;
  turnId?: string;
  /** The end of validity (ISO 8601). */
  validTo?: string;
  /** A time to live in seconds: the server sets `validTo` to now plus this. */
  ttlSeconds?: number;
  confidence?: number;
  source?: string;
  /**
   * When what the value says was observed (ISO 8601; default: the write's time). The server leaves a stored
   * value observed later as it is, and answers it with `skipped` (time order).
   */
  observedAt?: string;
}

/** What every memory read can filter on: the groups asked for and superseded versions. */
export interface ReadOptions {
  groupIds?: string[];
  includeSuperseded?: boolean;
}

export interface PageOptions {
  limit?: number;
  offset?: number;
}

/**
 * What a list, a search and a recall by relevance narrow to on the server, before the page is cut: `keyPrefix`,
 * one `visibility`, and `filter`, LangGraph's filter on the value's fields (`{field: value}` or
 * `{field: {"$gt": value}}`; `$eq $ne $gt $gte $lt $lte`), sent as JSON.
 */
export interface Narrowing {
  keyPrefix?: string;
  visibility?: Visibility;
  filter?: Record<string, unknown>;
}

export interface ListOptions extends ReadOptions, PageOptions, Narrowing {
  /** Only the entries this agent wrote (that the caller may see). */
  agentId?: string;
  /** As the store was at this time (ISO 8601). */
  asOf?: string;
  minConfidence?: number;
}

/**
 * Filters of every ranked read, applied with visibility on the server: `minScore` (a probability, 0 to 1, the
 * same scale for every query), `category` (one or any of several), `source`, `updatedAfter` (ISO 8601), and
 * {@link Narrowing}'s.
 */
export interface RankedFilters extends Narrowing {
  minScore?: number;
  category?: string | string[];
  source?: string;
  updatedAfter?: string;
}

/**
 * `mode` defaults to `hybrid` here (meaning and words), as in the Python client; the REST endpoint's own
 * default is EDDI's literal `keyword`. `agentId`: only the entries this agent wrote.
 */
export interface SearchOptions extends ReadOptions, PageOptions, RankedFilters {
  mode?: SearchMode;
  agentId?: string;
  minConfidence?: number;
}

/**
 * With `q`: recalled by relevance, the best `limit` (the agent's `recallTopK` when left out), at least `minScore`
 * relevant when given (no cut when left out), narrowed by the filters; `sourceAgentId`: only the entries this agent wrote. Without `q`: the policy's order.
 */
export interface RecallOptions extends RankedFilters {
  /** Admin and viewer keys: the agent recalling. */
  agentId?: string;
  asOf?: string;
  groupIds?: string[];
  order?: RecallOrder;
  limit?: number;
  minConfidence?: number;
  /** Recall by relevance to this text instead of the policy's order. */
  q?: string;
  mode?: RankedMode;
  sourceAgentId?: string;
}

/**
 * `conversationId` alone (no messages): the server reads the conversation's stored messages this agent has not
 * extracted yet; `afterMessageId` or `messageIds` say which. `dryRun`: the operations, nothing written.
 * `keyPrefix` (`"memories/"`): the facts' place: each fact's key goes under it, and the facts are compared only
 * with the entries under it in the scope new facts go to.
 */
export interface ExtractOptions {
  agentId?: string;
  visibility?: Visibility;
  groupIds?: string[];
  category?: string;
  conversationId?: string;
  afterMessageId?: string;
  messageIds?: string[];
  dryRun?: boolean;
  turnId?: string;
  keyPrefix?: string;
}

export interface CategoryOptions extends ReadOptions, PageOptions {}

export interface SearchAllOptions extends PageOptions {
  category?: string;
}

export interface MessageOptions {
  channel?: Channel;
  sessionId?: string;
  memoryEpoch?: number;
}

export interface MessageListOptions {
  channel?: Channel;
  after?: string;
  limit?: number;
  /** An epoch number, or `"all"`. */
  epoch?: string | number;
  /** `"agent"`: every user message and the agent's own items only. */
  view?: string;
  agentId?: string;
}

export interface ConversationListOptions {
  userId?: string;
  after?: string;
  limit?: number;
}

export interface ConversationSearchOptions extends PageOptions {
  userId?: string;
  agentId?: string;
  channel?: Channel;
}

export interface ToolContext {
  turnId?: string;
  conversationId?: string;
  groupIds?: string[];
}

export interface AgentFields {
  displayName?: string;
  capabilities?: string[];
  model?: string;
  status?: AgentStatus;
}

export interface AgentListOptions extends PageOptions {
  capability?: string;
  status?: AgentStatus;
}

export interface EventListOptions {
  /** The `next` cursor of the previous page; none: the oldest event. */
  after?: string;
  /** Only these event types (`memory.created`, ...); none: every type. */
  types?: string[];
  limit?: number;
}

export interface ToolCallListOptions {
  after?: string;
  agentId?: string;
  limit?: number;
  /** ISO 8601. */
  since?: string;
  success?: boolean;
  taskId?: string;
  tool?: string;
}

export interface TaskCreateOptions {
  assigneeId?: string;
  userId?: string;
  context?: unknown;
  visibility?: Visibility;
  groupIds?: string[];
}

export interface TaskListOptions extends PageOptions {
  assigneeId?: string;
  creatorId?: string;
  status?: TaskStatus;
}

export interface TaskUpdate {
  status?: TaskStatus;
  result?: unknown;
}
