// The ESM build against the live server with nothing but a runtime's web APIs (test/runtime-smoke.mjs): under
// Node always, and under Deno and Bun when they are on PATH. They are not devDependencies: their npm packages
// download 195 MB of binaries for every install, for this one test; CI has neither, and runs the Node smoke
// and the static check below, which holds the ESM build to the web's APIs whatever runtime runs it.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { ADMIN_KEY, fresh, URL } from "./helpers.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const smoke = join(here, "runtime-smoke.mjs");

/** The executable `name` on PATH, or null. */
function onPath(name) {
  for (const folder of (process.env.PATH ?? "").split(delimiter).filter(Boolean)) {
    try {
      accessSync(join(folder, name), constants.X_OK);
      return join(folder, name);
    } catch {}
  }
  return null;
}

const runtimes = {
  node: [process.execPath, smoke],
  deno: [onPath("deno"), "run", "--no-prompt", "--allow-net=127.0.0.1", "--no-config", smoke],
  bun: [onPath("bun"), smoke],
};

for (const [name, [command, ...args]] of Object.entries(runtimes)) {
  const skip = command === null ? `${name} is not on PATH` : false;
  test(`the client runs under ${name}`, { skip }, () => {
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
