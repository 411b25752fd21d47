// The real OpenAI and Anthropic Node SDKs against a running Ringside (tests/sdk_clients.rs).
//
// Usage: node check_clients.mjs http://127.0.0.1:PORT
//
// The same proxy and simulator as check_clients.py (the Python SDKs): model `gpt-4o-mini` has a
// rate-limited key first and a healthy key second; `gpt-mid` and `claude-mid` reset their streams
// after five events; `gpt-dead` answers 429 on every key; `claude-sonnet-4-5` is healthy. The
// Node SDKs speak through undici's fetch: another HTTP/1.1 client, with its own framing checks,
// keep-alive reuse and stream reader. Every check runs; the failures are listed at the end and
// the exit status is 1 if there was one.

import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const BASE = process.argv[2];
const oai = new OpenAI({ baseURL: BASE + "/v1", apiKey: "client-key", maxRetries: 0, timeout: 20000 });
const ant = new Anthropic({ baseURL: BASE, apiKey: "client-key", maxRetries: 0, timeout: 20000 });
const HI = [{ role: "user", content: "hi" }];
const TEXT = "Hello from the Ringside upstream simulator, friend";
const BIG = "x".repeat(17 << 20); // over the default max_body_bytes (16 MiB)
const CHECKS = [];
const check = (name, f) => CHECKS.push([name, f]);

// Runs `f`, which must throw an error of class `cls`; returns it.
async function raises(cls, f) {
  try {
    await f();
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.constructor?.name}: ${e}`);
    return e;
  }
  assert.fail(`no ${cls.name} raised`);
}

check("openai_models_list", async () => {
  const ids = [];
  for await (const m of oai.models.list()) ids.push(m.id);
  assert.ok(ids.includes("gpt-4o-mini") && ids.includes("claude-sonnet-4-5"), String(ids));
  assert.equal((await oai.models.retrieve("gpt-4o-mini")).id, "gpt-4o-mini");
  const e = await raises(OpenAI.NotFoundError, () => oai.models.retrieve("no-such-model"));
  assert.equal(e.code, "model_not_found");
});

check("openai_chat_fails_over_a_rate_limited_key", async () => {
  const { data, response } = await oai.chat.completions
    .create({ model: "gpt-4o-mini", messages: HI })
    .withResponse();
  assert.equal(data.choices[0].message.content, TEXT);
  assert.ok(data.usage.total_tokens > 0);
  assert.equal(response.headers.get("x-ringside-connection"), "oai/healthy");
  assert.ok(data._request_id?.startsWith("rs-"), data._request_id);
});

check("openai_keep_alive_reuse_in_parallel", async () => {
  // Many requests at once over undici's pool, JSON and streamed mixed: every answer whole.
  const jobs = [];
  for (let i = 0; i < 24; i++) {
    if (i % 2) {
      jobs.push(oai.chat.completions.create({ model: "gpt-4o-mini", messages: HI }).then((c) => c.choices[0].message.content));
    } else {
      jobs.push((async () => {
        let t = "";
        for await (const c of await oai.chat.completions.create({ model: "gpt-4o-mini", messages: HI, stream: true })) {
          t += c.choices[0]?.delta?.content ?? "";
        }
        return t;
      })());
    }
  }
  for (const t of await Promise.all(jobs)) assert.equal(t, TEXT);
});

check("openai_chat_stream_with_usage", async () => {
  let text = "";
  let usage = null;
  const stream = await oai.chat.completions.create({
    model: "gpt-4o-mini", messages: HI, stream: true, stream_options: { include_usage: true },
  });
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? "";
    if (c.usage) usage = c.usage;
  }
  assert.equal(text, TEXT);
  assert.ok(usage && usage.completion_tokens > 0, JSON.stringify(usage));
});

check("openai_completions_and_embeddings", async () => {
  const c = await oai.completions.create({ model: "gpt-4o-mini", prompt: "hi" });
  assert.equal(c.choices[0].text, TEXT);
  // The SDK asks for base64 (the simulator answers as OpenAI does) and decodes it.
  const v = (await oai.embeddings.create({ model: "gpt-4o-mini", input: "hi" })).data[0].embedding;
  assert.equal(v.length, 8);
  assert.ok(Math.abs(v[0] - 0.011) < 1e-6 && Math.abs(v[7] + 0.088) < 1e-6, String(v));
});

check("openai_responses_plain_and_streamed", async () => {
  assert.equal((await oai.responses.create({ model: "gpt-4o-mini", input: "hi" })).output_text, TEXT);
  const types = [];
  const s = oai.responses.stream({ model: "gpt-4o-mini", input: "hi" });
  for await (const ev of s) types.push(ev.type);
  const final = await s.finalResponse();
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  assert.equal(final.output_text, TEXT);
});

check("openai_unknown_model_is_a_not_found_error", async () => {
  const e = await raises(OpenAI.NotFoundError, () =>
    oai.chat.completions.create({ model: "no-such-model", messages: HI }));
  assert.equal(e.code, "model_not_found");
  assert.ok(e.requestID?.startsWith("rs-"), e.requestID);
  assert.ok(e.message.includes("no-such-model"), e.message);
});

check("openai_every_key_limited_is_a_clear_error", async () => {
  const e = await raises(OpenAI.APIError, () =>
    oai.chat.completions.create({ model: "gpt-dead", messages: HI }));
  assert.ok([429, 503].includes(e.status), String(e.status));
  assert.ok(e.headers.get("retry-after"), "retry-after");
  assert.ok(e.requestID?.startsWith("rs-"), e.requestID);
});

check("openai_stream_cut_mid_way_raises", async () => {
  const seen = [];
  const e = await raises(OpenAI.APIError, async () => {
    for await (const c of await oai.chat.completions.create({ model: "gpt-mid", messages: HI, stream: true })) {
      const t = c.choices[0]?.delta?.content;
      if (t) seen.push(t);
    }
  });
  assert.ok(String(e.message).includes("upstream"), e.message);
  assert.ok(seen.length > 0, "the events before the cut arrive first");
});

check("openai_oversize_body_is_a_413_not_a_connection_error", async () => {
  const e = await raises(OpenAI.APIError, () =>
    oai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: BIG }] }));
  assert.equal(e.status, 413);
  assert.equal(e.code, "request_too_large");
});

check("anthropic_messages_create", async () => {
  const m = await ant.messages.create({ model: "claude-sonnet-4-5", max_tokens: 64, messages: HI });
  assert.equal(m.content[0].text, TEXT);
  assert.equal(m.stop_reason, "end_turn");
  assert.ok(m._request_id?.startsWith("req_sim"), m._request_id);
});

check("anthropic_stream_helper", async () => {
  let text = "";
  const s = ant.messages.stream({ model: "claude-sonnet-4-5", max_tokens: 64, messages: HI });
  s.on("text", (t) => { text += t; });
  const final = await s.finalMessage();
  assert.equal(text, TEXT);
  assert.equal(final.stop_reason, "end_turn");
  assert.ok(final.usage.output_tokens > 0);
});

check("anthropic_models_and_count_tokens", async () => {
  const ids = [];
  for await (const m of ant.models.list()) ids.push(m.id);
  assert.ok(ids.includes("claude-sonnet-4-5"), String(ids));
  assert.equal((await ant.models.retrieve("claude-sonnet-4-5")).id, "claude-sonnet-4-5");
  const n = await ant.messages.countTokens({ model: "claude-sonnet-4-5", messages: HI });
  assert.ok(n.input_tokens > 0);
});

check("anthropic_unknown_model_is_a_not_found_error", async () => {
  const e = await raises(Anthropic.NotFoundError, () =>
    ant.messages.create({ model: "claude-no-such", max_tokens: 8, messages: HI }));
  assert.equal(e.error?.error?.type, "not_found_error", JSON.stringify(e.error));
  // Anthropic's SDK reads the id from `request-id`.
  assert.ok(e.requestID?.startsWith("rs-"), e.requestID);
});

check("anthropic_stream_cut_mid_way_raises", async () => {
  const seen = [];
  const e = await raises(Anthropic.APIError, async () => {
    const s = ant.messages.stream({ model: "claude-mid", max_tokens: 64, messages: HI });
    s.on("text", (t) => seen.push(t));
    await s.finalMessage();
  });
  assert.ok(String(e.message).includes("upstream"), e.message);
  assert.ok(seen.length > 0, "the events before the cut arrive first");
});

check("anthropic_oversize_body_is_a_413_not_a_connection_error", async () => {
  const e = await raises(Anthropic.APIError, () =>
    ant.messages.create({ model: "claude-sonnet-4-5", max_tokens: 8, messages: [{ role: "user", content: BIG }] }));
  assert.equal(e.status, 413);
  assert.equal(e.error?.error?.type, "request_too_large", JSON.stringify(e.error));
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
console.log(`${CHECKS.length - failed.length} of ${CHECKS.length} Node SDK checks passed`);
process.exit(failed.length ? 1 : 0);
