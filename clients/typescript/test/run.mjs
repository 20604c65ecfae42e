// The package's tests: start a live server (test/server.mjs), then node's test runner over test/*.test.*
// with MP_URL and MP_ADMIN_KEY set; the server is stopped whatever the outcome. Exits with the runner's code.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { startServer } from "./server.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = only.length
  ? only
  : readdirSync(here)
      .filter((name) => /\.test\.(mjs|cjs)$/.test(name))
      .map((name) => join(here, name));

const started = Date.now();
const server = await startServer();
console.log(`live server at ${server.url} (${((Date.now() - started) / 1000).toFixed(1)} s to start)`);
let code = 1;
try {
  const runner = spawn(process.execPath, ["--test", "--test-concurrency=2", ...files], {
    stdio: "inherit",
    env: { ...process.env, MP_URL: server.url, MP_ADMIN_KEY: server.adminKey },
  });
  code = await new Promise((done) => runner.on("exit", (status) => done(status ?? 1)));
} finally {
  await server.stop();
}
if (code !== 0) console.log(`server log: ${server.logPath}`);
process.exit(code);
