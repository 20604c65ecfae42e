// The CommonJS build: require() of the package and of each adapter, by the package's own name (exports).
const assert = require("node:assert/strict");
const { test } = require("node:test");

test("require() gives the client, the errors and the adapters", async () => {
  const mp = require("memoryplatform-client");
  assert.equal(typeof mp.MemoryPlatform, "function");
  assert.ok(new mp.CapacityError("full", { status: 409, code: "capacity" }) instanceof mp.ConflictError);
  assert.equal(mp.API_VERSION, "v1");
  assert.match(require.resolve("memoryplatform-client"), /dist[\\/]cjs[\\/]index\.js$/);
  assert.equal(typeof require("memoryplatform-client/ai").memoryTools, "function");
  assert.equal(typeof require("memoryplatform-client/langgraph").MemoryPlatformStore, "function");
  assert.equal(typeof require("memoryplatform-client/agents").MemoryPlatformSession, "function");
  const client = new mp.MemoryPlatform(process.env.MP_URL, process.env.MP_ADMIN_KEY);
  assert.equal((await client.health()).status, "ok");
});
