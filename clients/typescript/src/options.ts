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

export interface ListOptions extends ReadOptions, PageOptions {
  /** Admin and viewer keys: the entries this agent sees. */
  agentId?: string;
  /** As the store was at this time (ISO 8601). */
  asOf?: string;
  minConfidence?: number;
}

export interface SearchOptions extends ReadOptions, PageOptions {
  mode?: SearchMode;
  category?: string;
  minConfidence?: number;
}

export interface RecallOptions {
  agentId?: string;
  asOf?: string;
  groupIds?: string[];
  order?: RecallOrder;
  limit?: number;
  minConfidence?: number;
  /** Recall by relevance to this text instead of the policy's order. */
  q?: string;
  mode?: RankedMode;
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
