// The real OpenAI and Anthropic Node SDKs against Ringside falling back across providers
// (tests/sdk_clients.rs, `real_sdk_clients_cross_providers`): the same routes as
// check_translation.py, through undici's fetch and the Node SDKs' own stream readers.
//
// Usage: node check_translation.mjs http://127.0.0.1:PORT

import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const BASE = process.argv[2];
const oai = new OpenAI({ baseURL: BASE + "/v1", apiKey: "client-key", maxRetries: 0, timeout: 20000 });
const ant = new Anthropic({ baseURL: BASE, apiKey: "client-key", maxRetries: 0, timeout: 20000 });
const HI = [{ role: "user", content: "hi" }];
const TEXT = "Hello from the Ringside upstream simulator, friend";
const CHECKS = [];
const check = (name, f) => CHECKS.push([name, f]);

async function raises(cls, f) {
  try {
    await f();
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.constructor?.name}: ${e}`);
    return e;
  }
  assert.fail(`no ${cls.name} raised`);
}

check("openai_chat_answered_by_anthropic", async () => {
  const { data, response } = await oai.chat.completions
    .create({ model: "gpt-to-claude", messages: HI })
    .withResponse();
  assert.equal(data.choices[0].message.content, TEXT);
  assert.equal(data.choices[0].finish_reason, "stop");
  assert.equal(data.usage.prompt_tokens, 9);
  assert.equal(response.headers.get("x-ringside-translated"), "chat->messages");
});

check("openai_chat_stream_answered_by_anthropic", async () => {
  const parts = [];
  let usage = null;
  let finish = null;
  const stream = await oai.chat.completions.create({
    model: "gpt-to-claude", messages: HI, stream: true, stream_options: { include_usage: true },
  });
  for await (const c of stream) {
    if (c.choices[0]) {
      parts.push(c.choices[0].delta?.content ?? "");
      finish = c.choices[0].finish_reason ?? finish;
    }
    if (c.usage) usage = c.usage;
  }
  assert.equal(parts.join(""), TEXT);
  assert.equal(finish, "stop");
  assert.equal(usage?.prompt_tokens, 9);
});

check("openai_stream_helper_answered_by_anthropic", async () => {
  // The SDK's own accumulating helper reads every chunk's shape.
  const runner = oai.chat.completions.stream({ model: "gpt-to-claude", messages: HI });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, TEXT);
});

check("openai_responses_answered_by_anthropic", async () => {
  const r = await oai.responses.create({ model: "gpt-to-claude", input: "hi" });
  assert.equal(r.output_text, TEXT);
  const s = oai.responses.stream({ model: "gpt-to-claude", input: "hi" });
  const final = await s.finalResponse();
  assert.equal(final.output_text, TEXT);
  assert.equal(final.status, "completed");
});

check("anthropic_messages_answered_by_openai", async () => {
  const m = await ant.messages.create({ model: "claude-to-gpt", max_tokens: 64, messages: HI });
  assert.equal(m.content[0].text, TEXT);
  assert.equal(m.stop_reason, "end_turn");
  assert.equal(m.usage.input_tokens, 9);
});

check("anthropic_stream_answered_by_openai", async () => {
  const s = ant.messages.stream({ model: "claude-to-gpt", max_tokens: 64, messages: HI });
  const seen = [];
  s.on("text", (t) => seen.push(t));
  const final = await s.finalMessage();
  assert.equal(seen.join(""), TEXT);
  assert.equal(final.content[0].text, TEXT);
  assert.equal(final.stop_reason, "end_turn");
});

const TOOLS = [{ type: "function", function: { name: "weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];

check("openai_tool_round_trip_through_anthropic", async () => {
  const msgs = [{ role: "user", content: "weather in Paris?" }];
  // The SDK's helper assembles the streamed call from its chunks.
  const first = await oai.chat.completions.stream({ model: "gpt-to-claude", messages: msgs, tools: TOOLS }).finalChatCompletion();
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  const call = first.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, "weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
  msgs.push(first.choices[0].message, { role: "tool", tool_call_id: call.id, content: "18C" });
  const final = await oai.chat.completions.create({ model: "gpt-to-claude", messages: msgs, tools: TOOLS });
  assert.equal(final.choices[0].message.content, TEXT);
});

check("anthropic_tool_round_trip_through_openai", async () => {
  const tools = [{ name: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
  const msgs = [{ role: "user", content: "weather in Paris?" }];
  const m = await ant.messages.stream({ model: "claude-to-gpt", max_tokens: 64, messages: msgs, tools }).finalMessage();
  assert.equal(m.stop_reason, "tool_use");
  const use = m.content.find((b) => b.type === "tool_use");
  assert.deepEqual(use.input, { city: "Paris" });
  msgs.push({ role: "assistant", content: m.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18C" }] });
  const final = await ant.messages.create({ model: "claude-to-gpt", max_tokens: 64, messages: msgs, tools });
  assert.equal(final.content[0].text, TEXT);
});

check("openai_stream_cut_after_a_fallback_raises", async () => {
  const seen = [];
  const e = await raises(OpenAI.APIError, async () => {
    for await (const c of await oai.chat.completions.create({ model: "gpt-to-claude-cut", messages: HI, stream: true })) {
      const t = c.choices[0]?.delta?.content;
      if (t) seen.push(t);
    }
  });
  assert.ok(String(e.message).includes("upstream"), e.message);
  assert.ok(seen.length > 0, "the events before the cut arrive first");
});

check("anthropic_stream_cut_after_a_fallback_raises", async () => {
  const seen = [];
  const e = await raises(Anthropic.APIError, async () => {
    const s = ant.messages.stream({ model: "claude-to-gpt-cut", max_tokens: 64, messages: HI });
    s.on("text", (t) => seen.push(t));
    await s.finalMessage();
  });
  assert.ok(String(e.message).includes("upstream"), e.message);
  assert.ok(seen.length > 0, "the events before the cut arrive first");
});

const failed = [];
for (const [name, f] of CHECKS) {
  try {
    await f();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed.push(name);
    console.log(`FAIL ${name}\n${e?.stack ?? e}`);
  }
}
console.log(`${CHECKS.length - failed.length} of ${CHECKS.length} Node translation checks passed`);
process.exit(failed.length ? 1 : 0);
