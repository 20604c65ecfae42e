// A live memoryplatform server for the tests, as .ci/fuzz.py starts one: the embedded PostgreSQL in a new,
// throwaway DATA_DIR, migrated; a first admin key (manage.py createapikey); `manage.py serve` on a free port.
// Its LLM is the Python suite's scripted one (tests/llm_server.py), answering what the shared scenario
// (clients/scenario/contract.json) says, so that extraction runs for real over HTTP.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
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

export const SCENARIO = join(ROOT, "clients", "scenario", "contract.json");

/** The scripted LLM (`python -m tests.llm_server`): resolves to { url, stop() } once it listens. */
async function startLlm() {
  const child = spawn(PYTHON, ["-m", "tests.llm_server", SCENARIO], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise((done) => {
    child.once("exit", done);
    child.once("error", done); // not started (no python at PYTHON)
  });
  const [url] = await Promise.race([
    createInterface({ input: child.stdout })[Symbol.asyncIterator]().next().then((line) => [line.value]),
    exited.then((code) => {
      throw new Error(`the scripted LLM exited (${code}) before it listened`);
    }),
  ]);
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await exited;
  };
  return { url, stop };
}

function serverEnv(llmUrl) {
  const env = { ...process.env, DATA_DIR: mkdtempSync(join(tmpdir(), "mp-ts-data-")), LOG_LEVEL: "WARNING" };
  delete env.DATABASE_URL; // never the environment's database: this one is new and thrown away
  delete env.REDIS_URL; // Celery runs tasks in process: no worker needed
  // Short texts get their vectors in their write's request, so a test's search right after it finds them by
  // meaning (the default leaves every vector to the background consumer, a moment later).
  env.EMBEDDINGS_INLINE_MAX_CHARS = "48";
  Object.assign(env, {
    LLM_PROVIDER: "openai",
    LLM_URL: llmUrl,
    LLM_MODEL: "test-model",
    LLM_PRICES: JSON.stringify({ "test-model": [1, 1] }),
  });
  return env;
}

const manage = (env, ...args) =>
  execFileSync(PYTHON, [join(ROOT, "manage.py"), ...args], { cwd: ROOT, env, encoding: "utf8" });

/** Start the server; resolves to { url, adminKey, stop() }. */
export async function startServer() {
  const llm = await startLlm();
  try {
    return await startDjango(llm);
  } catch (error) {
    await llm.stop();
    throw error;
  }
}

async function startDjango(llm) {
  const env = serverEnv(llm.url);
  manage(env, "migrate", "--noinput", "-v", "0");
  const adminKey = manage(env, "createapikey", "--role", "admin", "--label", "ts-tests").trim().split("\n").at(-1);
  const port = await freePort();
  const logPath = join(env.DATA_DIR, "server.log");
  const log = openSync(logPath, "w");
  const args = ["serve", "--host", "127.0.0.1", "--port", String(port), "--workers", "1", "--threads", "4"];
  const child = spawn(PYTHON, [join(ROOT, "manage.py"), ...args, "--no-background"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", log, log],
    detached: true, // its own process group, so that stop() ends its workers too
  });
  let exited = false;
  child.on("exit", () => (exited = true));
  const stop = async () => {
    await llm.stop();
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
