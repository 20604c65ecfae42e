// Deno and Bun (from their npm packages) run the ESM build against the live server: fetch only, no Node.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { ADMIN_KEY, fresh, URL } from "./helpers.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const bin = (name) => join(here, "..", "node_modules", ".bin", name);
const smoke = join(here, "runtime-smoke.mjs");

const runtimes = {
  deno: [bin("deno"), "run", "--no-prompt", "--allow-net=127.0.0.1", "--no-config", smoke],
  bun: [bin("bun"), smoke],
};

for (const [name, [command, ...args]] of Object.entries(runtimes)) {
  test(`the client runs under ${name}`, () => {
    const done = spawnSync(command, [...args, URL, ADMIN_KEY, fresh(name)], { encoding: "utf8", timeout: 120_000 });
    assert.equal(done.status, 0, `${done.stdout}\n${done.stderr}`);
    assert.equal(done.stdout.trim(), `ok ${name}`);
  });
}

test("the ESM build names no Node API (for edge runtimes, which have only the web's)", async () => {
  const { readdirSync, readFileSync } = await import("node:fs");
  const dist = join(here, "..", "dist", "esm");
  const nodeOnly = /from "node:|require\(|\bprocess\.|\bBuffer\b|__dirname/;
  const files = readdirSync(dist).filter((file) => file.endsWith(".js"));
  assert.ok(files.length >= 8);
  for (const file of files) assert.doesNotMatch(readFileSync(join(dist, file), "utf8"), nodeOnly, file);
});
