// The extract call's keyPrefix against the live server (its scripted LLM proposes home_city = Lisbon): the
// facts go under the prefix, as a LangGraph namespace holds them, in one real extraction whose provenance
// (the model, the extraction, the messages) each fact's history keeps, as every door's.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BadRequestError } from "../dist/esm/index.js";
import { fresh, team } from "./helpers.mjs";

test("an extraction under a keyPrefix writes its facts there, with the extraction's provenance", async () => {
  const { clients } = await team("nova");
  const { nova } = clients;
  const userId = fresh("ana");
  await nova.upsertMemory(userId, "home_city", "Porto");
  const said = [{ role: "user", content: "Hi! I'm Ana, I just moved to Lisbon.", id: "m-1" }];

  const done = await nova.extract(userId, said, { keyPrefix: "memories/" });

  assert.equal(done.dryRun, false);
  assert.deepEqual(
    done.operations.map((o) => [o.op, o.key]),
    [["ADD", "memories/home_city"]],
  );
  assert.equal((await nova.getMemoryByKey(userId, "home_city")).value, "Porto"); // not of the place: left as is
  const [written] = await nova.getMemoryHistory(done.operations[0].entryId);
  assert.equal(written.provenance.model, done.model);
  assert.equal(written.provenance.source, "extracted");
  assert.match(written.provenance.extraction, /\S/);
  assert.deepEqual(written.provenance.messageIds, ["m-1"]);
  assert.deepEqual(written.provenance.messageIndexes, [0]);
});

test("a keyPrefix that is not a key's start ending with '/' is refused before any call", async () => {
  const { clients } = await team("nova");
  const said = [{ role: "user", content: "Hi!" }];
  await assert.rejects(clients.nova.extract(fresh("ana"), said, { keyPrefix: "memories" }), (error) => {
    assert.ok(error instanceof BadRequestError);
    assert.match(error.message, /keyPrefix/);
    return true;
  });
});
