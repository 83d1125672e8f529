// LangGraph's JavaScript client (`@langchain/langgraph-sdk` on npm, the one `useStream`
// and Agent Chat UI are built on) against `weft serve`'s LangGraph door.
//
//     node client.mjs BASE_URL TOKEN NODE_MODULES
//
// NODE_MODULES is where `scripts/langgraph-client` installed the client.
// Each scenario asserts what the client receives; the last line is `langgraph js ok`.

import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [base, token, modules] = process.argv.slice(2);
const sdk = join(modules, "@langchain/langgraph-sdk/dist/index.js");
const { Client } = await import(pathToFileURL(sdk).href);
const client = new Client({ apiUrl: base, apiKey: token });
const human = (text) => ({ messages: [{ type: "human", content: text }] });

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

async function refused(status, call) {
  try {
    await call;
  } catch (e) {
    assert.equal(e.status, status, `expected HTTP ${status}: ${e}`);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}

async function streamAndHistory() {
  const { thread_id } = await client.threads.create({ metadata: { from: "js" } });
  const parts = await collect(
    client.runs.stream(thread_id, "chat", {
      input: human("what's the weather?"),
      streamMode: ["values", "updates", "messages-tuple"],
    }),
  );
  assert.equal(parts[0].event, "metadata");
  const chunks = parts.filter((p) => p.event === "messages").map((p) => p.data[0]);
  assert.equal(chunks.map((m) => m.content).join(""), "It is sunny.");
  assert.deepEqual(parts.find((p) => p.event === "updates").data, { answer: "It is sunny." });
  const last = parts.at(-1);
  assert.equal(last.event, "values");
  assert.deepEqual(last.data.messages.map((m) => m.type), ["human", "ai"]);
  const values = await client.runs.wait(thread_id, "chat", { input: human("hi") });
  assert.deepEqual(values.messages.map((m) => m.content), ["what's the weather?", "It is sunny.", "hi", "Hello from Weft."]);
  const history = await client.threads.getHistory(thread_id);
  assert.equal(history.length, 2);
  const state = await client.threads.getState(thread_id);
  assert.equal(state.values.messages.length, 4);
}

async function interruptAndResume() {
  const { thread_id } = await client.threads.create();
  const parts = await collect(
    client.runs.stream(thread_id, "release-approval", {
      input: { version: "2.0", changes: ["x"] },
      streamMode: ["updates", "values"],
    }),
  );
  const interrupt = parts.find((p) => p.event === "updates" && p.data.__interrupt__);
  assert.ok(interrupt, JSON.stringify(parts));
  assert.match(interrupt.data.__interrupt__[0].value, /^Publish these notes\?/);
  assert.equal((await client.threads.get(thread_id)).status, "interrupted");
  const done = await client.runs.wait(thread_id, "release-approval", { command: { resume: "approve" } });
  assert.equal(done.released, true);
  assert.equal((await client.threads.get(thread_id)).status, "idle");
}

async function rejoin() {
  const { thread_id } = await client.threads.create();
  let runId;
  const parts = await collect(
    client.runs.stream(thread_id, "slow", {
      input: {},
      streamMode: ["updates"],
      onRunCreated: ({ run_id }) => {
        runId = run_id;
      },
    }),
  );
  assert.deepEqual(parts.filter((p) => p.event === "updates").map((p) => Object.keys(p.data)[0]), ["one", "two", "three"]);
  // Each part's id, as the stream sent it, names where a rejoin resumes.
  const response = await fetch(`${base}/threads/${thread_id}/runs/${runId}/stream`, { headers: { "x-api-key": token } });
  const ids = (await response.text()).split("\n").filter((l) => l.startsWith("id: ")).map((l) => l.slice(4));
  const afterOne = await collect(client.runs.joinStream(thread_id, runId, { lastEventId: ids[0] }));
  assert.deepEqual(afterOne.filter((p) => p.event === "updates").map((p) => p.data), [{ two: "done" }, { three: "done" }]);
}

async function cancelAndReject() {
  const { thread_id } = await client.threads.create();
  const run = await client.runs.create(thread_id, "slow", { input: {} });
  await refused(409, client.runs.create(thread_id, "slow", { input: {}, multitaskStrategy: "reject" }));
  await client.runs.cancel(thread_id, run.run_id);
  assert.equal((await client.runs.get(thread_id, run.run_id)).status, "interrupted");
  await refused(404, client.runs.create(thread_id, "no-such-assistant", { input: {} }));
}

await streamAndHistory();
await interruptAndResume();
await rejoin();
await cancelAndReject();
console.log("langgraph js ok");
