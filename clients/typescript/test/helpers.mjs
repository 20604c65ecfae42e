// What the tests share: the live server's URL and admin key, and agents with keys of their own.
import { randomUUID } from "node:crypto";

import { MemoryPlatform } from "../dist/esm/index.js";

export const URL = process.env.MP_URL;
export const ADMIN_KEY = process.env.MP_ADMIN_KEY;
if (!URL || !ADMIN_KEY) throw new Error("run the tests with `npm test` (test/run.mjs starts the server)");

export const admin = () => new MemoryPlatform(URL, ADMIN_KEY, { maxRetries: 0 });

/** A fresh name, so that tests running side by side never meet. */
export const fresh = (stem) => `${stem}-${randomUUID().slice(0, 8)}`;

/** Agents in a new group, each with a client on its own key: { group, clients: {name: MemoryPlatform} }. */
export async function team(...names) {
  const mp = admin();
  const ids = names.map(fresh);
  for (const id of ids) await mp.createAgent(id, { displayName: id });
  const group = fresh("team");
  await mp.createGroup(group, { members: ids });
  const clients = {};
  for (const [i, name] of names.entries()) {
    const { key } = await mp.createAgentKey(ids[i], { label: "ts-test" });
    clients[name] = new MemoryPlatform(URL, key, { maxRetries: 0 });
  }
  return { group, ids, clients };
}
