// A live memoryplatform server for the tests, as .ci/fuzz.py starts one: the embedded PostgreSQL in a new,
// throwaway DATA_DIR, migrated; a first admin key (manage.py createapikey); `manage.py serve` on a free port.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const PYTHON = process.env.MP_PYTHON ?? join(ROOT, ".venv", "bin", "python");

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

function serverEnv() {
  const env = { ...process.env, DATA_DIR: mkdtempSync(join(tmpdir(), "mp-ts-data-")), LOG_LEVEL: "WARNING" };
  delete env.DATABASE_URL; // never the environment's database: this one is new and thrown away
  delete env.REDIS_URL; // Celery runs tasks in process: no worker needed
  // Short texts get their vectors in their write's request, so a test's search right after it finds them by
  // meaning (the default leaves every vector to the background consumer, a moment later).
  env.EMBEDDINGS_INLINE_MAX_CHARS = "48";
  return env;
}

const manage = (env, ...args) =>
  execFileSync(PYTHON, [join(ROOT, "manage.py"), ...args], { cwd: ROOT, env, encoding: "utf8" });

/** Start the server; resolves to { url, adminKey, stop() }. */
export async function startServer() {
  const env = serverEnv();
  manage(env, "migrate", "--noinput", "-v", "0");
  const adminKey = manage(env, "createapikey", "--role", "admin", "--label", "ts-tests").trim().split("\n").at(-1);
  const port = await freePort();
  const logPath = join(env.DATA_DIR, "server.log");
  const log = openSync(logPath, "w");
  const args = ["serve", "--host", "127.0.0.1", "--port", String(port), "--workers", "1", "--threads", "4"];
  const child = spawn(PYTHON, [join(ROOT, "manage.py"), ...args, "--no-dream-scheduler"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", log, log],
    detached: true, // its own process group, so that stop() ends its workers too
  });
  let exited = false;
  child.on("exit", () => (exited = true));
  const stop = async () => {
    if (exited) return;
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {}
    const deadline = Date.now() + 15_000;
    while (!exited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {}
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (exited) throw new Error(`the server exited:\n${readFileSync(logPath, "utf8").slice(-3000)}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {}
    if (Date.now() > deadline) {
      await stop();
      throw new Error("the server did not answer /healthz within 90 s");
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  return { url, adminKey, logPath, stop };
}
