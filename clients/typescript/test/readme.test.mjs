// The must-show of the README: `npm install <this package>` in a scratch project (with the adapters' peer
// packages), then every `js` example of README.md run there as written, the server's port changed, each
// `// prints X` comment checked against what the example printed. The set-up example's keys feed the rest.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { ADMIN_KEY, URL } from "./helpers.mjs";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
const PEERS = ["ai", "zod", "@langchain/langgraph-checkpoint", "@langchain/core", "@openai/agents-core"];

function examples() {
  const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
  return [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((match) => match[1]);
}

function npm(cwd, ...args) {
  return execFileSync("npm", [...args, "--no-audit", "--no-fund", "--prefer-offline"], { cwd, encoding: "utf8" });
}

test("the README's examples run in a scratch project after npm install", { timeout: 600_000 }, () => {
  const scratch = mkdtempSync(join(tmpdir(), "mp-ts-readme-"));
  // The README's overrides too (openai 6 under the Agents SDK, for Node 18+), as the README tells.
  const { devDependencies, overrides } = JSON.parse(readFileSync(join(PACKAGE, "package.json"), "utf8"));
  const manifest = { name: "scratch", private: true, type: "module", overrides };
  writeFileSync(join(scratch, "package.json"), JSON.stringify(manifest));
  npm(scratch, "install", PACKAGE, ...PEERS.map((name) => `${name}@${devDependencies[name]}`));

  const blocks = examples();
  assert.equal(blocks.length, 6, "set-up, client, AI SDK, LangGraph, Agents SDK, case log");
  const env = { ...process.env, ADMIN_KEY };
  for (const [index, block] of blocks.entries()) {
    assert.ok(block.includes("http://127.0.0.1:8000"), `example ${index} names the server`);
    const file = join(scratch, `example-${index}.mjs`);
    writeFileSync(file, block.replaceAll("http://127.0.0.1:8000", URL));
    const printed = execFileSync(process.execPath, [file], { cwd: scratch, env, encoding: "utf8" });
    for (const [, expected] of block.matchAll(/\/\/ prints (.*)$/gm)) {
      assert.ok(printed.includes(expected), `example ${index} should print ${expected}; it printed:\n${printed}`);
    }
    for (const [, name, value] of printed.matchAll(/^(\w+_KEY)=(\S+)$/gm)) env[name] = value;
  }
  assert.ok(env.NOVA_KEY && env.ANIZA_KEY, "the set-up example printed the agents' keys");
});
