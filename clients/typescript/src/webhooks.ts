/**
 * Verifying a webhook delivery: {@link verifyWebhook} checks its `Webhook-Signature` (HMAC-SHA256, keyed by
 * the subscription's secret, over `"<Webhook-Timestamp>." + body`) and its age, and returns the event.
 *
 * Give it the body as received (the raw text or bytes), before any JSON parsing: a re-serialised body signs
 * differently. Deliveries are at least once: keep the `id` of the events handled and drop one seen before.
 * Web Crypto only, so it runs in Node (18 and later), Deno, Bun, browsers and edge workers.
 */

import type { ChangeEvent } from "./types.js";

export const DEFAULT_TOLERANCE_SECONDS = 300;

/** The delivery is not signed by the secret, or its timestamp is too old or too new. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

export interface VerifyWebhookOptions {
  secret: string;
  body: string | Uint8Array;
  /** The request's headers: a `Headers`, or a plain object (any case of the names). */
  headers: Headers | Record<string, string | string[] | undefined>;
  toleranceSeconds?: number;
  /** Now, in Unix seconds (tests); default: the clock. */
  now?: number;
}

function header(headers: VerifyWebhookOptions["headers"], name: string): string {
  let value: string | string[] | null | undefined;
  if (typeof Headers !== "undefined" && headers instanceof Headers) {
    value = headers.get(name);
  } else {
    const entries = Object.entries(headers as Record<string, string | string[] | undefined>);
    value = entries.find(([key]) => key.toLowerCase() === name.toLowerCase())?.[1];
  }
  if (Array.isArray(value)) value = value[0];
  if (value === undefined || value === null) throw new WebhookVerificationError(`No ${name} header.`);
  return value;
}

async function subtle(): Promise<SubtleCrypto> {
  const global = (globalThis as { crypto?: Crypto }).crypto;
  if (global?.subtle) return global.subtle;
  const name = "node:crypto"; // Node 18, where Web Crypto is not yet global (a name: no types needed)
  const node = (await import(name)) as { webcrypto: Crypto };
  return node.webcrypto.subtle;
}

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Equal strings, compared in time that does not depend on where they differ. */
function same(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** The event a delivery carries, once its signature and timestamp check out; else a WebhookVerificationError. */
export async function verifyWebhook(options: VerifyWebhookOptions): Promise<ChangeEvent> {
  const raw = typeof options.body === "string" ? new TextEncoder().encode(options.body) : options.body;
  const stamp = header(options.headers, "Webhook-Timestamp");
  if (!/^[0-9]+$/.test(stamp)) throw new WebhookVerificationError("Webhook-Timestamp is not a whole number.");
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(stamp)) > (options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError("Webhook-Timestamp is outside the tolerance.");
  }
  const crypto = await subtle();
  const encoder = new TextEncoder();
  const key = await crypto.importKey("raw", encoder.encode(options.secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const prefix = encoder.encode(`${stamp}.`);
  const signed = new Uint8Array(prefix.length + raw.length);
  signed.set(prefix);
  signed.set(raw, prefix.length);
  const expected = `v1=${hex(await crypto.sign("HMAC", key, signed))}`;
  const given = header(options.headers, "Webhook-Signature").split(",").map((part) => part.trim());
  if (!given.some((signature) => same(signature, expected))) {
    throw new WebhookVerificationError("The signature does not match.");
  }
  return JSON.parse(new TextDecoder().decode(raw)) as ChangeEvent;
}
