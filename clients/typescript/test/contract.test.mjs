// The client contract (clients/scenario/contract.json), run by this client against the live server: every
// public call of the contract, in order, with the answers and refusals the scenario expects. The Python
// client runs the same file (tests/client/test_client_contract.py), so the two cannot drift: a call one
// client lacks, or has beyond the contract, fails here or there.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { APIError, MemoryPlatform } from "../dist/esm/index.js";
import { ADMIN_KEY, URL } from "./helpers.mjs";
import { SCENARIO } from "./server.mjs";

const scenario = JSON.parse(readFileSync(SCENARIO, "utf8"));
const TRANSPORT = new Set(["constructor", "send"]); // how a client sends, not a call of the API
const camel = (name) => name.replace(/_([a-z])/g, (_, letter) => letter.toUpperCase());
const camelKeys = (options) => Object.fromEntries(Object.entries(options).map(([name, value]) => [camel(name), value]));

test("the contract names every call of the client, and no other", () => {
  const contract = new Set(scenario.contract.map(camel));
  const stepped = new Set(scenario.steps.filter((step) => step.call).map((step) => camel(step.call)));
  assert.deepEqual([...contract].filter((name) => !stepped.has(name)), [], "calls of the contract that no step runs");
  const calls = Object.getOwnPropertyNames(MemoryPlatform.prototype).filter(
    (name) => !TRANSPORT.has(name) && typeof MemoryPlatform.prototype[name] === "function",
  );
  assert.deepEqual([...contract].filter((name) => !calls.includes(name)), [], "calls of the contract the client lacks");
  assert.deepEqual(calls.filter((name) => !contract.has(name)), [], "calls of the client outside the contract");
});

/** `{run}` in strings, `$name.field` strings as the saved field's value, recursively. */
function resolver(run, saved) {
  const resolve = (value) => {
    if (typeof value === "string") {
      if (!value.startsWith("$")) return value.replaceAll("{run}", run);
      const [name, ...path] = value.slice(1).split(".");
      return path.reduce((found, field) => found[field], saved[name]);
    }
    if (Array.isArray(value)) return value.map(resolve);
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, resolve(item)]));
    }
    return value;
  };
  return resolve;
}

/** The scenario's partial match: an object's named fields (`{}` only an empty object), a list item by item. */
function matches(expected, actual) {
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && expected.length === actual.length && expected.every((e, i) => matches(e, actual[i]));
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) return false;
    const names = Object.keys(expected);
    if (names.length === 0) return Object.keys(actual).length === 0;
    return names.every((name) => name in actual && matches(expected[name], actual[name]));
  }
  return expected === actual;
}

const lengths = (expected, actual) =>
  expected === undefined
    ? []
    : typeof expected === "number"
      ? [[expected, actual.length]]
      : Object.entries(expected).map(([field, number]) => [number, actual[field].length]);

function check(resolve, step, answer) {
  const said = `step ${JSON.stringify(step)} answered ${JSON.stringify(answer)?.slice(0, 1500)}`;
  if ("expect" in step) assert.ok(matches(resolve(step.expect), answer), said);
  if ("expect_first" in step) assert.ok(answer.length > 0 && matches(resolve(step.expect_first), answer[0]), said);
  for (const [wanted, got] of lengths(step.expect_length, answer)) assert.equal(got, wanted, said);
  for (const [wanted, got] of lengths(step.expect_min_length, answer)) assert.ok(got >= wanted, said);
  if (step.expect_keys || step.expect_keys_include || step.expect_keys_exclude) {
    const keys = answer.map((entry) => entry.key);
    if (step.expect_keys) assert.deepEqual(keys, step.expect_keys, said);
    for (const key of step.expect_keys_include ?? []) assert.ok(keys.includes(key), said);
    for (const key of step.expect_keys_exclude ?? []) assert.ok(!keys.includes(key), said);
  }
  for (const [field, text] of Object.entries(resolve(step.expect_match ?? {}))) {
    const value = field === "" ? answer : answer[field];
    assert.ok((typeof value === "string" ? value : JSON.stringify(value)).includes(text), said);
  }
}

test("the shared scenario passes through the TypeScript client", async () => {
  const saved = {};
  const resolve = resolver(randomUUID().slice(0, 8), saved);
  const clients = { admin: new MemoryPlatform(URL, ADMIN_KEY, { maxRetries: 0 }) };
  for (const step of scenario.steps) {
    if (step.open) {
      clients[step.open] = new MemoryPlatform(URL, resolve(step.key), { maxRetries: 0 });
      continue;
    }
    const client = clients[step.as];
    const name = camel(step.call);
    assert.equal(typeof client[name], "function", `the TypeScript client lacks ${name}, which the scenario calls`);
    const sent = () => client[name](...resolve(step.args ?? []), camelKeys(resolve(step.options ?? {})));
    if (step.expect_error) {
      await assert.rejects(sent, (error) => {
        assert.ok(error instanceof APIError, `${name}: ${error}`);
        assert.deepEqual({ status: error.status, code: error.code }, step.expect_error, JSON.stringify(step));
        return true;
      });
      continue;
    }
    let answer = await sent();
    if (typeof answer?.[Symbol.asyncIterator] === "function") {
      const items = []; // Array.fromAsync is Node 22's
      for await (const item of answer) items.push(item);
      answer = items;
    }
    check(resolve, step, answer);
    if (step.save) saved[step.save] = answer;
  }
});
