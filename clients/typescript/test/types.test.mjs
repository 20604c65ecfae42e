// The .d.ts of both builds, as a TypeScript user resolves them: test/types compiles against the package.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

test("the declarations type-check for ESM and CommonJS users", () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const project = fileURLToPath(new URL("./types/tsconfig.json", import.meta.url));
  const done = spawnSync(process.execPath, [tsc, "-p", project], { encoding: "utf8" });
  assert.equal(done.status, 0, done.stdout + done.stderr);
});
