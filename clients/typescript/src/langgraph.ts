/**
 * LangGraph.js adapter (`memoryplatform-client/langgraph`; peer dependency `@langchain/langgraph-checkpoint`):
 * a `BaseStore` over the platform's user memories, for `graph.compile({ store })`.
 *
 * Namespaces map onto users and keys, reversibly:
 * - the user is one element of the namespace: by default the first, or the second when the first is
 *   `"memories"`, so both layouts of LangGraph's docs work, `[userId, "memories"]` and
 *   `["memories", userId]` (option `userIndex` to fix another position);
 * - the other elements, then the item's key, make the platform's key, joined by `/` (a `/` or `%` inside an
 *   element is written `%2F` or `%25`): `put([userId, "memories"], "food", v)` writes the key
 *   `memories/food` of user `userId`, and reading that key gives back the namespace and key.
 * Values are stored as the JSON objects they are; an entry whose value is not an object (written by another
 * door) reads as `{ value: <it> }`.
 */

import {
  BaseStore,
  type GetOperation,
  InvalidNamespaceError,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";

import type { MemoryPlatform } from "./client.js";
import { NotFoundError } from "./errors.js";
import type { MemoryEntry, Visibility } from "./types.js";

/** The most entries the server returns to one list or search: the store's window for prefix filtering. */
const WINDOW = 1000;

export interface MemoryPlatformStoreOptions {
  /** The user's position in every namespace (default: 0, or 1 when the namespace starts with "memories"). */
  userIndex?: number;
  /** Of new entries (the server's default otherwise); it must be one the agent's policy allows. */
  category?: string;
  visibility?: Visibility;
  groupIds?: string[];
  /** Every put expires after this many seconds (the server sets the entry's `validTo`). */
  ttlSeconds?: number;
}

const escape = (part: string) => part.replace(/%/g, "%25").replace(/\//g, "%2F");
const unescape = (part: string) => part.replace(/%2F/gi, "/").replace(/%25/g, "%");

interface Place {
  userId: string;
  index: number;
  rest: string[];
}

type Filter = Record<string, unknown>;

function matches(value: Record<string, unknown>, filter: Filter | undefined): boolean {
  for (const [field, wanted] of Object.entries(filter ?? {})) {
    const actual = value[field];
    const isOps = typeof wanted === "object" && wanted !== null && !Array.isArray(wanted);
    const ops = isOps ? Object.entries(wanted as Filter) : [["$eq", wanted] as const];
    for (const [op, operand] of ops) {
      if (!compare(op, actual, operand)) return false;
    }
  }
  return true;
}

function compare(op: string, actual: unknown, operand: unknown): boolean {
  const a = actual as number | string;
  const b = operand as number | string;
  switch (op) {
    case "$eq":
      return JSON.stringify(actual) === JSON.stringify(operand);
    case "$ne":
      return JSON.stringify(actual) !== JSON.stringify(operand);
    case "$gt":
      return actual !== undefined && a > b;
    case "$gte":
      return actual !== undefined && a >= b;
    case "$lt":
      return actual !== undefined && a < b;
    case "$lte":
      return actual !== undefined && a <= b;
    case "$in":
      return Array.isArray(operand) && operand.some((o) => JSON.stringify(o) === JSON.stringify(actual));
    case "$nin":
      return Array.isArray(operand) && !operand.some((o) => JSON.stringify(o) === JSON.stringify(actual));
    default:
      throw new Error(`unsupported filter operator ${op}`);
  }
}

const startsWith = (parts: string[], prefix: string[]) => prefix.every((part, i) => part === parts[i]);

/** A LangGraph `BaseStore` over one agent key's view of the platform's user memories. */
export class MemoryPlatformStore extends BaseStore {
  constructor(
    readonly client: MemoryPlatform,
    readonly options: MemoryPlatformStoreOptions = {},
  ) {
    super();
  }

  /** Where the user is in `namespace`, and the other elements. */
  place(namespace: string[]): Place {
    const index = this.options.userIndex ?? (namespace[0] === "memories" ? 1 : 0);
    const userId = namespace[index];
    if (!userId) {
      throw new InvalidNamespaceError(`namespace ${JSON.stringify(namespace)} names no user at position ${index}`);
    }
    return { userId, index, rest: namespace.filter((_, i) => i !== index) };
  }

  /** The platform key of `key` in the namespace whose non-user elements are `rest`. */
  platformKey(rest: string[], key: string): string {
    return [...rest, key].map(escape).join("/");
  }

  /** The namespace and key of a platform entry, with the user at `index`. */
  located(entry: MemoryEntry, index: number): { namespace: string[]; key: string } {
    const parts = entry.key.split("/").map(unescape);
    const key = parts.pop() as string;
    const namespace = [...parts];
    namespace.splice(Math.min(index, namespace.length), 0, entry.userId);
    return { namespace, key };
  }

  private item(entry: MemoryEntry, index: number): SearchItem {
    const isObject = typeof entry.value === "object" && entry.value !== null && !Array.isArray(entry.value);
    const value = isObject ? (entry.value as Record<string, unknown>) : { value: entry.value };
    return {
      ...this.located(entry, index),
      value,
      createdAt: new Date(entry.createdAt),
      updatedAt: new Date(entry.updatedAt),
      ...(entry.score === undefined ? {} : { score: entry.score }),
    };
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) {
      if ("key" in op && "value" in op) results.push(await this.putOp(op as PutOperation));
      else if ("key" in op) results.push(await this.getOp(op as GetOperation));
      else if ("namespacePrefix" in op) results.push(await this.searchOp(op as SearchOperation));
      else results.push(await this.listNamespacesOp(op as ListNamespacesOperation));
    }
    return results as OperationResults<Op>;
  }

  private async entry(namespace: string[], key: string): Promise<[Place, MemoryEntry | null]> {
    const place = this.place(namespace);
    try {
      const found = await this.client.getMemoryByKey(place.userId, this.platformKey(place.rest, key), {
        groupIds: this.options.groupIds,
      });
      return [place, found];
    } catch (error) {
      if (error instanceof NotFoundError) return [place, null];
      throw error;
    }
  }

  private async getOp(op: GetOperation): Promise<Item | null> {
    const [place, found] = await this.entry(op.namespace, op.key);
    return found && this.item(found, place.index);
  }

  private async putOp(op: PutOperation): Promise<void> {
    if (op.value === null) {
      const [, found] = await this.entry(op.namespace, op.key);
      if (found) await this.client.deleteMemory(found.id);
      return;
    }
    const { userId, rest } = this.place(op.namespace);
    const { category, visibility, groupIds, ttlSeconds } = this.options;
    await this.client.upsertMemory(userId, this.platformKey(rest, op.key), op.value, {
      category,
      visibility,
      groupIds: visibility === "group" ? groupIds : undefined,
      ttlSeconds,
    });
  }

  /** The user's entries under the namespace: by hybrid search with a query, else the newest first. */
  private async searchOp(op: SearchOperation): Promise<SearchItem[]> {
    const place = this.place(op.namespacePrefix);
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    const narrowed = place.rest.length > 0 || Object.keys(op.filter ?? {}).length > 0;
    // Without a namespace or value filter the server pages; with one, it returns its window and we narrow.
    const page = narrowed ? { limit: WINDOW } : { limit, offset };
    const groupIds = this.options.groupIds;
    const entries = op.query
      ? await this.client.searchMemories(place.userId, op.query, { mode: "hybrid", groupIds, ...page })
      : await this.client.listMemories(place.userId, { groupIds, ...page }); // the newest first
    const items = entries
      .map((entry) => this.item(entry, place.index))
      .filter((item) => startsWith(item.namespace, op.namespacePrefix) && matches(item.value, op.filter));
    return narrowed ? items.slice(offset, offset + limit) : items;
  }

  private async listNamespacesOp(op: ListNamespacesOperation): Promise<string[][]> {
    const prefix = op.matchConditions?.find((c) => c.matchType === "prefix")?.path ?? [];
    const place = this.place(prefix as string[]);
    if (place.userId === "*") throw new InvalidNamespaceError("listNamespaces needs a prefix that names the user");
    const entries = await this.client.listMemories(place.userId, { groupIds: this.options.groupIds, limit: WINDOW });
    const seen = new Map<string, string[]>();
    for (const entry of entries) {
      let namespace = this.located(entry, place.index).namespace;
      if (!(op.matchConditions ?? []).every((c) => conditionHolds(namespace, c.matchType, c.path))) continue;
      if (op.maxDepth !== undefined) namespace = namespace.slice(0, op.maxDepth);
      seen.set(JSON.stringify(namespace), namespace);
    }
    const sorted = [...seen.values()].sort((a, b) => a.join("\u0000").localeCompare(b.join("\u0000")));
    return sorted.slice(op.offset, op.offset + op.limit);
  }
}

function conditionHolds(namespace: string[], matchType: string, path: string[]): boolean {
  if (path.length > namespace.length) return false;
  const part = matchType === "prefix" ? namespace.slice(0, path.length) : namespace.slice(-path.length);
  return path.every((p, i) => p === "*" || p === part[i]);
}
