export { MemoryPlatform, memoryInput, messageInput, textContent } from "./client.js";
export {
  API_VERSION,
  type Call,
  type ClientOptions,
  DEFAULT_MAX_RETRIES,
  DEFAULT_TIMEOUT_MS,
  MAX_QUERY_CHARS,
  RetryPolicy,
  retryAfterSeconds,
  Transport,
  VERSION,
} from "./core.js";
export * from "./errors.js";
export {
  DEFAULT_TOLERANCE_SECONDS,
  type VerifyWebhookOptions,
  verifyWebhook,
  WebhookVerificationError,
} from "./webhooks.js";
export type * from "./options.js";
export type * from "./types.js";
