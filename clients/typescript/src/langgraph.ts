/**
 * LangGraph.js adapter (`memoryplatform-client/langgraph`; peer dependency `@langchain/langgraph-checkpoint`):
 * a `BaseStore` over the platform's user memories, for `graph.compile({ store })`. It maps namespaces as the
 * Python store (`memoryplatform_client.langgraph`) does, so both read and write the same items.
 *
 * A namespace names a user, labels and a scope:
 * - the user: without `userIndex`, next to `"memories"`, as LangGraph's docs spell it: `["memories", userId,
 *   ...]` or `[userId, "memories", ...]`. Any other layout (`["profiles", userId]`, `["users", userId,
 *   "memories"]`, `[userId, "prefs"]`) is refused with an `InvalidNamespaceError` naming `userIndex`, never
 *   guessed; `userIndex: n` takes the user from position `n` of every namespace, every other element a label;
 * - the labels: the other elements (`"memories"` too), as the key's prefix, each followed by `/` (a `/` or
 *   `%` inside one written `%2F` or `%25`): `put([userId, "memories"], "food", v)` and `put(["memories",
 *   userId], "food", v)` write the key `memories/food` of user `userId`, one item, read back in the spelling
 *   asked (each layout round-trips); a word the layouts reserve (`memories`, `global`, `group`) where the
 *   user is, is refused (`["memories", "u-77"]` with `userIndex: 0` is no user `memories`);
 * - the scope: a namespace ending in `"global"` holds the user's `global` entries (every agent reads them),
 *   one ending in `["group", groupId]` that group's `group` entries; any other, the agent's own (`self`).
 *
 * Values are stored as the JSON objects they are; an entry whose value is not an object (written by another
 * door, or a string put by the Python store) reads as `{ value: <it> }`. Search (`query`: hybrid, meaning
 * and words, each item with a `score`), `filter` (`{field: value}` or `$eq $ne $gt $gte $lt $lte`), the
 * prefix's labels and scope, `limit` and `offset` go to the server, which applies them before cutting the
 * page. `listNamespaces`' wildcards (`"*"` in its prefix and suffix, LangGraph's `MatchCondition`) are matched
 * by the server (the list's `keyPattern`), then checked here against each namespace.
 *
 * A put is a turn of its own (a store has no turns: a loop of puts meets no `maxWritesPerTurn`). TTLs are in
 * minutes, as LangGraph's: `put(ns, key, value, undefined, { ttl: 60 })`, or the store's `ttl.defaultTtl`;
 * a read renews the TTL of what it returns unless `ttl.refreshOnRead` is `false`.
 */

import {
  BaseStore,
  type GetOperation,
  InvalidNamespaceError,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";

import type { MemoryPlatform } from "./client.js";
import { type Call, type QueryValue, segment } from "./core.js";
import { NotFoundError } from "./errors.js";
import type { MemoryEntry, Visibility } from "./types.js";

const ROOT = "memories";
/** Never a user: the layouts' root and scopes. */
const RESERVED = [ROOT, "global", "group"];
const SEP = "/";
const WILDCARD = "*";
const SCAN_LIMIT = 1000; // the server's largest page
const MAX_PATTERNS = 32; // the list's keyPattern: at most this many (beyond, the store asks for every entry)
const MEMORIES = "/usermemorystore/memories";

/** LangGraph's TTL settings, in minutes (as `TTLConfig` of LangGraph's Python stores). */
export interface TtlConfig {
  /** Of a put that gives none; none: no end. */
  defaultTtl?: number;
  /** Whether a get or a search renews the TTL of what it returns (default: true). */
  refreshOnRead?: boolean;
}

export interface MemoryPlatformStoreOptions {
  /** The user's position in every namespace; without it, next to "memories" (else refused). */
  userIndex?: number;
  /** Of new entries (the server's default otherwise); it must be one the agent's policy allows. */
  category?: string;
  ttl?: TtlConfig;
}

/** A put's own options (beyond LangGraph's `index`). */
export interface PutOptions {
  /** Minutes until the item expires (`null`: never, whatever the store's default). */
  ttl?: number | null;
}

type StorePut = PutOperation & { ttl?: number | null };

const escape = (part: string) => part.replace(/%/g, "%25").replace(/\//g, "%2F");
const unescape = (part: string) => part.replace(/%2F/gi, "/").replace(/%25/g, "%");
const keyPrefixOf = (labels: readonly string[]) => labels.map((label) => escape(label) + SEP).join("");

/**
 * Where the user is in a namespace of a store without `userIndex`: next to "memories", `["memories", userId,
 * ...]` (1) or `[userId, "memories", ...]` (0). Any other layout is refused (the Python store's rule).
 */
export function userPosition(namespace: readonly string[]): number {
  if (namespace.length >= 2 && namespace[0] === ROOT) return 1;
  if (namespace.length >= 2 && namespace[1] === ROOT && namespace[0] !== WILDCARD) return 0;
  throw new InvalidNamespaceError(
    `Which element of ${JSON.stringify(namespace)} is the user? Without userIndex a namespace names its user ` +
      `next to "${ROOT}": ["${ROOT}", userId, ...] or [userId, "${ROOT}", ...]. For another layout, give ` +
      `new MemoryPlatformStore(client, { userIndex: N }), the user's position: 1 for ["profiles", userId] ` +
      `or ["users", userId, "memories"], 0 for [userId, "prefs"].`,
  );
}

/** Where a namespace (or a prefix of one) puts items: the user, labels, scope, and its spelling. */
export class Place {
  constructor(
    readonly userId: string,
    readonly labels: string[],
    /** `null`: any (a prefix that says none). */
    readonly visibility: Visibility | null,
    readonly groupId: string | null,
    /** The user's position among the labels. */
    readonly userAt: number,
  ) {}

  static of(namespace: readonly string[], options: { prefix?: boolean; userIndex?: number } = {}): Place {
    if (namespace.some((part) => typeof part !== "string" || part === "")) {
      const got = JSON.stringify(namespace);
      throw new InvalidNamespaceError(`A namespace is an array of non-empty strings: got ${got}.`);
    }
    const index = options.userIndex ?? userPosition(namespace);
    if (namespace.length <= index || namespace[index] === WILDCARD) {
      throw new InvalidNamespaceError(
        `This store's namespaces name the user at position ${index} (userIndex): got ${JSON.stringify(namespace)}.`,
      );
    }
    if (RESERVED.includes(namespace[index])) {
      throw new InvalidNamespaceError(
        `${JSON.stringify(namespace)} names the user "${namespace[index]}" at position ${index}, a word the ` +
          `layout reserves (${RESERVED.join(", ")}): put the user where the layout says (userIndex).`,
      );
    }
    let rest = [...namespace.slice(0, index), ...namespace.slice(index + 1)];
    let visibility: Visibility | null = options.prefix ? null : "self";
    let group: string | null = null;
    if (rest.at(-1) === "global") {
      visibility = "global";
      rest = rest.slice(0, -1);
    } else if (rest.length >= 2 && rest.at(-2) === "group") {
      visibility = "group";
      group = rest.at(-1) as string;
      rest = rest.slice(0, -2);
    } else if (options.prefix && rest.at(-1) === "group") {
      visibility = "group";
      rest = rest.slice(0, -1);
    }
    return new Place(namespace[index], rest, visibility, group, index);
  }

  get keyPrefix(): string {
    return keyPrefixOf(this.labels);
  }

  /** The platform's key of an item of this place. */
  key(key: string): string {
    return this.keyPrefix + escape(key);
  }

  get groupIds(): string[] | undefined {
    return this.groupId ? [this.groupId] : undefined;
  }

  holds(entry: MemoryEntry): boolean {
    if (this.visibility !== null && entry.visibility !== this.visibility) return false;
    return this.groupId === null || (entry.groupIds ?? []).includes(this.groupId);
  }

  /** What the server narrows a list or a search to for this place (as a prefix). */
  narrowing(): Record<string, QueryValue> {
    return {
      keyPrefix: this.labels.length ? this.keyPrefix : undefined,
      visibility: this.visibility ?? undefined,
      groupId: this.groupIds,
    };
  }

  /** The namespaces an entry is found under in this place's spelling (a group entry under each of its
   * groups), and the item's key. */
  namespacesOf(entry: MemoryEntry): [string[][], string] {
    const labels = entry.key.split(SEP).map(unescape);
    const key = labels.pop() as string;
    const at = Math.min(this.userAt, labels.length);
    const base = [...labels.slice(0, at), entry.userId, ...labels.slice(at)];
    if (entry.visibility === "global") return [[[...base, "global"]], key];
    if (entry.visibility === "group") return [(entry.groupIds ?? []).map((g) => [...base, "group", g]), key];
    return [[base], key];
  }
}

function matches(namespace: readonly string[], condition: MatchCondition): boolean {
  const path = condition.path;
  if (path.length > namespace.length) return false;
  const part = condition.matchType === "prefix" ? namespace.slice(0, path.length) : namespace.slice(-path.length);
  return path.every((want, i) => want === WILDCARD || want === part[i]);
}

// --- listNamespaces' key patterns (the Python store's key_patterns) ---------------------------------------

const pattern = (segments: readonly string[]) =>
  segments.map((part) => (part === WILDCARD || part === "**" ? part : escape(part))).join(SEP);

/** The labels both sequences of one length match (a `*` matches any one), or null. */
function unify(left: readonly string[], right: readonly string[]): string[] | null {
  const both: string[] = [];
  for (let i = 0; i < left.length; i++) {
    if (left[i] !== WILDCARD && right[i] !== WILDCARD && left[i] !== right[i]) return null;
    both.push(left[i] === WILDCARD ? right[i] : left[i]);
  }
  return both;
}

/** The labels a condition's path may start or end with, `[labels, exact]`: all of it, and where its last
 * elements may be a scope (`global`, `["group", id]`, `group` ending a prefix), the labels before them. */
function readings(path: readonly string[]): [string[], boolean][] {
  const found: [string[], boolean][] = [[[...path], false]];
  const last = path.at(-1);
  if (last !== undefined && [WILDCARD, "global", "group"].includes(last)) found.push([path.slice(0, -1), true]);
  if (path.length >= 2 && [WILDCARD, "group"].includes(path.at(-2) as string)) found.push([path.slice(0, -2), true]);
  return found;
}

/** The key patterns (any of them) of every entry whose namespace meets the conditions (`prefix` and
 * `suffix` without the user); `null`: too many to ask for. */
export function keyPatterns(prefix: readonly string[], suffix: readonly string[]): string[] | null {
  const patterns: string[] = [];
  const ends: [string[], boolean][] = suffix.length ? readings(suffix) : [[[], false]];
  for (const [start, exact] of readings(prefix)) {
    for (const [end] of ends) {
      if (exact) {
        const both = end.length <= start.length ? unify(start.slice(start.length - end.length), end) : null;
        if (both) patterns.push(pattern([...start.slice(0, start.length - end.length), ...both, WILDCARD]));
        continue;
      }
      patterns.push(pattern([...start, "**", ...end, WILDCARD]));
      for (let overlap = 1; overlap <= Math.min(start.length, end.length); overlap++) {
        const both = unify(start.slice(start.length - overlap), end.slice(0, overlap));
        if (!both) continue;
        patterns.push(pattern([...start.slice(0, start.length - overlap), ...both, ...end.slice(overlap), WILDCARD]));
      }
    }
  }
  const unique = [...new Set(patterns)];
  return unique.length <= MAX_PATTERNS ? unique : null;
}

/** The prefix's and the suffix's elements that are labels or scope: the prefix without the
 * user, the suffix from after its last element that may be the user (`*` or the user id, near its start). */
function conditionLabels(place: Place, conditions: readonly MatchCondition[]): [string[], string[]] {
  const prefix = conditions.find((c) => c.matchType === "prefix")?.path ?? [];
  const at = place.userAt;
  const suffix = conditions.find((c) => c.matchType === "suffix")?.path ?? [];
  let cut = 0;
  suffix.forEach((part, i) => {
    if ((part === WILDCARD || part === place.userId) && i <= at) cut = i + 1;
  });
  return [[...prefix.slice(0, at), ...prefix.slice(at + 1)], suffix.slice(cut)];
}

// --- The store ---------------------------------------------------------------------------------------------

const user = (userId: string) => `${MEMORIES}/${segment(userId)}`;
let turns = 0;
/** A turn id no other put shares (it needs to be unique, not secret: every runtime, no `crypto`). */
const storeTurn = () =>
  `store-${Date.now().toString(36)}-${(turns++).toString(36)}-${Math.random().toString(36).slice(2)}`;
const filterQuery = (filter: Record<string, unknown> | undefined) =>
  filter && Object.keys(filter).length ? JSON.stringify(filter) : undefined;

/** A LangGraph `BaseStore` over one agent key's view of the platform's user memories. */
export class MemoryPlatformStore extends BaseStore {
  constructor(
    readonly client: MemoryPlatform,
    readonly options: MemoryPlatformStoreOptions = {},
  ) {
    super();
    const { userIndex } = options;
    if (userIndex !== undefined && !(Number.isInteger(userIndex) && userIndex >= 0)) {
      throw new RangeError("userIndex is a position in the namespace: 0 or more.");
    }
  }

  /** Where this store puts the items of `namespace` (its user, labels and scope). */
  place(namespace: readonly string[], prefix = false): Place {
    return Place.of(namespace, { prefix, userIndex: this.options.userIndex });
  }

  /** LangGraph's `put`, and a TTL of this item in minutes (`options.ttl`; `null`: none). */
  override async put(
    namespace: string[],
    key: string,
    value: Record<string, unknown>,
    index?: false | string[],
    options: PutOptions = {},
  ): Promise<void> {
    // No BaseStore.put: it would drop the TTL. The namespace is checked where every operation's is (Place.of).
    const op: StorePut = { namespace, key, value, index };
    if ("ttl" in options) op.ttl = options.ttl;
    await this.batch([op]);
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) {
      if ("key" in op && "value" in op) results.push(await this.putOp(op as StorePut));
      else if ("key" in op) results.push(await this.getOp(op as GetOperation));
      else if ("namespacePrefix" in op) results.push(await this.searchOp(op as SearchOperation));
      else results.push(await this.listNamespacesOp(op as ListNamespacesOperation));
    }
    return results as OperationResults<Op>;
  }

  private item(place: Place, entry: MemoryEntry, wanted: MatchCondition): SearchItem {
    const [namespaces, key] = place.namespacesOf(entry);
    const namespace = namespaces.find((ns) => matches(ns, wanted)) ?? namespaces[0];
    const isObject = typeof entry.value === "object" && entry.value !== null && !Array.isArray(entry.value);
    return {
      namespace,
      key,
      value: isObject ? (entry.value as Record<string, unknown>) : { value: entry.value },
      createdAt: new Date(entry.createdAt),
      updatedAt: new Date(entry.updatedAt),
      ...(entry.score === undefined ? {} : { score: entry.score }),
    };
  }

  private list(place: Place, query: Record<string, QueryValue>): Promise<MemoryEntry[]> {
    return this.client.send<MemoryEntry[]>({ method: "GET", path: user(place.userId), query });
  }

  /** Renew the TTL of the entries read (one call), unless the store says not to. */
  private async refresh(place: Place, entries: MemoryEntry[]): Promise<void> {
    const ids = entries.filter((entry) => entry.validTo).map((entry) => entry.id);
    if (this.options.ttl?.refreshOnRead === false || ids.length === 0) return;
    const call: Call<unknown> = {
      method: "POST",
      path: `${user(place.userId)}/ttl-refresh`,
      body: { ids, ...(place.groupIds ? { groupIds: place.groupIds } : {}) },
    };
    await this.client.send(call);
  }

  /** The entry under this namespace and key: the server's by-key read when it answers with that entry (it
   * prefers the caller's own), else the entries with that key, narrowed by the server. */
  private async find(place: Place, key: string): Promise<MemoryEntry | null> {
    const stored = place.key(key);
    let entry: MemoryEntry;
    try {
      entry = await this.client.getMemoryByKey(place.userId, stored, { groupIds: place.groupIds });
    } catch (error) {
      if (error instanceof NotFoundError) return null;
      throw error;
    }
    if (place.holds(entry)) return entry;
    const entries = await this.list(place, { ...place.narrowing(), keyPrefix: stored });
    return entries.find((e) => e.key === stored && place.holds(e)) ?? null;
  }

  private async getOp(op: GetOperation): Promise<Item | null> {
    const place = this.place(op.namespace);
    const entry = await this.find(place, op.key);
    if (!entry) return null;
    await this.refresh(place, [entry]);
    const { score: _, ...item } = this.item(place, entry, { matchType: "prefix", path: op.namespace });
    return { ...item, namespace: op.namespace, key: op.key };
  }

  private async putOp(op: StorePut): Promise<void> {
    const place = this.place(op.namespace);
    if (op.value === null) {
      const entry = await this.find(place, op.key);
      if (!entry) return;
      try {
        await this.client.deleteMemory(entry.id);
      } catch (error) {
        if (!(error instanceof NotFoundError)) throw error; // gone meanwhile: the wanted outcome
      }
      return;
    }
    const minutes = op.ttl === undefined ? this.options.ttl?.defaultTtl : op.ttl;
    await this.client.upsertMemory(place.userId, place.key(op.key), op.value, {
      category: this.options.category,
      visibility: place.visibility ?? "self",
      groupIds: place.groupIds,
      // A turn of its own: a store's writes are its caller's code, not an LLM's turn (maxWritesPerTurn).
      turnId: storeTurn(),
      ttlSeconds: minutes == null ? undefined : Math.max(1, Math.round(minutes * 60)),
    });
  }

  /** The user's entries under the prefix: by hybrid search with a query, else the newest first. */
  private async searchOp(op: SearchOperation): Promise<SearchItem[]> {
    const place = this.place(op.namespacePrefix, true);
    const page = { limit: op.limit ?? 10, offset: op.offset ?? 0 };
    const query = { ...place.narrowing(), filter: filterQuery(op.filter), ...page };
    const entries = op.query
      ? await this.client.send<MemoryEntry[]>({
          method: "GET",
          path: `${user(place.userId)}/search`,
          query: { q: op.query, mode: "hybrid", ...query },
        })
      : await this.list(place, query);
    await this.refresh(place, entries);
    return entries.map((entry) => this.item(place, entry, { matchType: "prefix", path: op.namespacePrefix }));
  }

  private async listNamespacesOp(op: ListNamespacesOperation): Promise<string[][]> {
    const conditions = op.matchConditions ?? [];
    const prefix = conditions.find((c) => c.matchType === "prefix");
    if (!prefix) throw new InvalidNamespaceError("listNamespaces needs prefix: [...] naming the user.");
    const place = this.place(prefix.path, true);
    const wildcards = prefix.path.includes(WILDCARD) || conditions.some((c) => c.matchType === "suffix");
    let query: Record<string, QueryValue> = { limit: SCAN_LIMIT };
    if (wildcards) {
      const patterns = keyPatterns(...conditionLabels(place, conditions));
      if (patterns && patterns.length === 0) return []; // no key can meet them
      if (patterns) query.keyPattern = patterns; // the server matches the wildcards (any of them)
    } else {
      query = { ...query, ...place.narrowing() };
    }
    const seen = new Map<string, string[]>();
    for (const entry of await this.list(place, query)) {
      for (let namespace of place.namespacesOf(entry)[0]) {
        if (!conditions.every((c) => matches(namespace, c))) continue;
        if (op.maxDepth !== undefined) namespace = namespace.slice(0, op.maxDepth);
        seen.set(JSON.stringify(namespace), namespace);
      }
    }
    const sorted = [...seen.values()].sort(compareNamespaces);
    return sorted.slice(op.offset, op.offset + op.limit);
  }
}

/** Python's order of tuples of strings: element by element, by code point, a shorter one first. */
function compareNamespaces(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return a.length - b.length;
}
