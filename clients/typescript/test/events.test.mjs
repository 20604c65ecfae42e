// The change feed over real HTTP (listEvents: pages, a type filter, what an agent may read), and
// verifyWebhook against a delivery signed as the server signs one (HMAC-SHA256 over "<timestamp>." + body).
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { test } from "node:test";

import { BadRequestError, verifyWebhook, WebhookVerificationError } from "../dist/esm/index.js";
import { fresh, team } from "./helpers.mjs";

test("listEvents: pages that follow each other, a type filter, only what the agent may read", async () => {
  const { clients } = await team("nova", "aniza");
  const { nova, aniza } = clients;
  const user = fresh("events-user");
  for (const n of [0, 1, 2]) await nova.upsertMemory(user, `k${n}`, n, { visibility: "global" });
  await nova.upsertMemory(user, "k0", "changed", { visibility: "global" });
  await aniza.upsertMemory(user, "aniza-only", "private");

  const mine = (page) => page.results.filter((e) => e.userId === user).map((e) => e.key);
  const start = await nova.listEvents({ limit: 500 });
  let after = start.next;
  const keys = mine(start);
  for (;;) {
    const page = await nova.listEvents({ after, limit: 500 });
    if (page.results.length === 0) {
      assert.equal(page.next, after); // nothing new: the same cursor
      break;
    }
    keys.push(...mine(page));
    after = page.next;
  }
  assert.deepEqual(keys, ["k0", "k1", "k2", "k0"]); // not aniza's own entry
  const updates = (await nova.listEvents({ types: ["memory.updated"], limit: 500 })).results.filter(
    (e) => e.userId === user,
  );
  assert.deepEqual(
    updates.map((e) => [e.value, e.oldValue]),
    [["changed", 0]],
  );
  await assert.rejects(nova.listEvents({ after: "not-a-cursor" }), BadRequestError);
});

function signed(secret, body, timestamp) {
  const digest = createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
  return { "Webhook-Id": "1", "Webhook-Timestamp": String(timestamp), "Webhook-Signature": `v1=${digest}` };
}

test("verifyWebhook: a signed body verifies; a tampered one, another secret or an old one does not", async () => {
  const secret = "whsec_test";
  const body = JSON.stringify({ id: "4503599627370497", type: "memory.created", userId: "u1", key: "city" });
  const now = Math.floor(Date.now() / 1000);
  const headers = signed(secret, body, now);
  const event = await verifyWebhook({ secret, body, headers });
  assert.equal(event.key, "city");
  assert.equal((await verifyWebhook({ secret, body: new TextEncoder().encode(body), headers: new Headers(headers) })).type, "memory.created");
  await assert.rejects(verifyWebhook({ secret, body: body.replace("city", "town"), headers }), WebhookVerificationError);
  await assert.rejects(verifyWebhook({ secret: "whsec_other", body, headers }), WebhookVerificationError);
  await assert.rejects(verifyWebhook({ secret, body, headers, now: now + 3600 }), WebhookVerificationError);
  await assert.rejects(verifyWebhook({ secret, body, headers: {} }), WebhookVerificationError);
});
