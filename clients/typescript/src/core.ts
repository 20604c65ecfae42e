/**
 * What every call shares: a request is a {@link Call} (method, path, query, body, how to read the answer);
 * the {@link Transport} sends it with `fetch` (Node 18+, Deno, Bun, browsers and edge runtimes), retrying
 * idempotent calls by the same rule as the Python client.
 */

import { APIConnectionError, errorFor, QueryTooLongError } from "./errors.js";

export const VERSION = "0.1.0";
/** The server API this client speaks: the `/v1` routes and the EDDI-compatible memory store, as of 0.1. */
export const API_VERSION = "v1";
export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_RETRIES = 2;
/** The server's limit on a query (`q` of a search, a recall, a context), in characters, at every door. */
export const MAX_QUERY_CHARS = 1000;
const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "PUT", "DELETE"]);
const RETRY_STATUSES = new Set([429, 503]);
const MAX_RETRY_AFTER_S = 60;

export type Method = "GET" | "HEAD" | "PUT" | "POST" | "PATCH" | "DELETE";
export type QueryValue = string | number | boolean | null | undefined | readonly string[];

/** One API request and how to read its answer. */
export interface Call<T> {
  method: Method;
  path: string;
  query?: Record<string, QueryValue>;
  body?: unknown;
  decode?: (response: Response) => Promise<T>;
}

/** One path segment, percent-encoded: a userId or key may hold `/`, spaces and any unicode. */
export function segment(value: string | number): string {
  return encodeURIComponent(String(value));
}

/** Query parameters without the undefined/null ones; an array repeats its name (`groupId=a&groupId=b`). */
export function queryString(values: Record<string, QueryValue> | undefined): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values ?? {})) {
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) {
      for (const item of value) params.append(name, String(item));
    } else {
      params.append(name, String(value));
    }
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

/** A JSON body without the undefined values (left out, the server's defaults apply). */
export function compact<T extends Record<string, unknown>>(values: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined) (out as Record<string, unknown>)[name] = value;
  }
  return out;
}

/** `q` as sent: refused here, before anything is sent, when it is longer than the server takes. */
export function checkedQuery(q: string | undefined): string | undefined {
  if (q === undefined) return q;
  const length = [...q].length; // code points, as the server counts
  if (length > MAX_QUERY_CHARS) throw new QueryTooLongError(length, MAX_QUERY_CHARS);
  return q;
}

/** `Retry-After` in seconds (a number or an HTTP date), at most 60, or null. */
export function retryAfterSeconds(response: Response): number | null {
  const raw = response.headers.get("Retry-After");
  if (!raw) return null;
  let seconds = Number(raw);
  if (!Number.isFinite(seconds)) {
    const when = Date.parse(raw);
    if (Number.isNaN(when)) return null;
    seconds = (when - Date.now()) / 1000;
  }
  return Math.min(Math.max(seconds, 0), MAX_RETRY_AFTER_S);
}

/**
 * Retries of idempotent calls (GET, HEAD, PUT, DELETE) on 429, 503 and connection errors: the server's
 * `Retry-After` when it sends one, else exponential backoff with jitter. POSTs and PATCHes are never retried.
 */
export class RetryPolicy {
  constructor(
    readonly maxRetries: number = DEFAULT_MAX_RETRIES,
    readonly backoffS: number = 0.5,
    readonly maxBackoffS: number = 8,
  ) {}

  /** Seconds to wait before sending `method` again after `attempt` (0 for the first try), or null. */
  delay(method: Method, attempt: number, response: Response | null): number | null {
    if (!IDEMPOTENT_METHODS.has(method) || attempt >= this.maxRetries) return null;
    if (response !== null && !RETRY_STATUSES.has(response.status)) return null;
    const told = response === null ? null : retryAfterSeconds(response);
    if (told !== null) return told;
    const ceiling = Math.min(this.maxBackoffS, this.backoffS * 2 ** attempt);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }
}

export interface ClientOptions {
  /** Per attempt, in milliseconds (30,000). */
  timeoutMs?: number;
  /** Retries of an idempotent call (2). */
  maxRetries?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** A `fetch` of your own (default: the global one). */
  fetch?: typeof fetch;
}

const sleep = (seconds: number) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

async function decodeJson<T>(response: Response): Promise<T> {
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Sends calls for one key and server. */
export class Transport {
  readonly baseUrl: string;
  readonly retryPolicy: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.retryPolicy = new RetryPolicy(options.maxRetries ?? DEFAULT_MAX_RETRIES);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const found = options.fetch ?? globalThis.fetch;
    if (typeof found !== "function") throw new Error("memoryplatform-client needs fetch (Node 18+, Deno, Bun)");
    this.fetchImpl = found;
    this.headers = {
      Authorization: `Bearer ${apiKey}`,
      Accept: "application/json",
      "User-Agent": `memoryplatform-client-js/${VERSION}`,
      ...(options.headers ?? {}),
    };
  }

  private async attempt(call: Call<unknown>, url: string): Promise<Response> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    const headers: Record<string, string> = { ...this.headers };
    if (call.body !== undefined) headers["Content-Type"] = "application/json";
    try {
      return await this.fetchImpl(url, {
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: controller.signal,
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Send one call, retrying it when the policy says so; its decoded answer, or the typed error. */
  async send<T>(call: Call<T>): Promise<T> {
    const url = `${this.baseUrl}${call.path}${queryString(call.query)}`;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.attempt(call, url);
      } catch (error) {
        const wait = this.retryPolicy.delay(call.method, attempt, null);
        if (wait === null) {
          throw new APIConnectionError(`${call.method} ${call.path}: ${String(error)}`, { cause: error });
        }
        await sleep(wait);
        continue;
      }
      const wait = this.retryPolicy.delay(call.method, attempt, response);
      if (wait === null) return finish(call, response);
      await response.body?.cancel();
      await sleep(wait);
    }
  }
}

async function finish<T>(call: Call<T>, response: Response): Promise<T> {
  if (response.status >= 400) {
    const text = await response.text();
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    throw errorFor({ status: response.status, body, text, retryAfter: retryAfterSeconds(response) });
  }
  return (call.decode ?? decodeJson<T>)(response);
}
