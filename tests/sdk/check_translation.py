"""The real OpenAI and Anthropic Python SDKs against Ringside falling back across providers
(tests/sdk_clients.rs, `real_sdk_clients_cross_providers`).

Usage: check_translation.py http://127.0.0.1:PORT

Routes (each tries a provider at its wall first, then one of the other API; the simulator runs
strict, refusing what the real provider would): `gpt-to-claude` (OpenAI 429, then Anthropic),
`claude-to-gpt` (Anthropic 529, then OpenAI), and the same with `-cut`, whose fallback's stream
is reset after five events.
"""

import json
import sys
import traceback
import warnings

import anthropic
import openai

warnings.simplefilter("ignore")
BASE = sys.argv[1]
oai = openai.OpenAI(base_url=BASE + "/v1", api_key="client-key", max_retries=0, timeout=20)
ant = anthropic.Anthropic(base_url=BASE, api_key="client-key", max_retries=0, timeout=20)
HI = [{"role": "user", "content": "hi"}]
TEXT = "Hello from the Ringside upstream simulator, friend"
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
CHECKS = []


def check(f):
    CHECKS.append(f)
    return f


@check
def openai_chat_answered_by_anthropic():
    raw = oai.chat.completions.with_raw_response.create(model="gpt-to-claude", messages=HI)
    c = raw.parse()
    assert c.choices[0].message.content == TEXT, c
    assert c.choices[0].finish_reason == "stop", c
    assert c.model == "gpt-to-claude", c.model
    assert c.usage.prompt_tokens == 9 and c.usage.completion_tokens > 0, c.usage
    assert raw.headers["x-ringside-translated"] == "chat->messages", raw.headers
    assert raw.headers["x-ringside-connection"] == "ant/ok", raw.headers


@check
def openai_chat_stream_answered_by_anthropic():
    parts, usage, finish = [], None, None
    for chunk in oai.chat.completions.create(
        model="gpt-to-claude", messages=HI, stream=True, stream_options={"include_usage": True}
    ):
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    assert "".join(parts) == TEXT, parts
    assert finish == "stop", finish
    assert usage is not None and usage.prompt_tokens == 9, usage


@check
def openai_image_and_schema_reach_anthropic_in_its_shape():
    # The strict simulator refuses a body Anthropic would refuse: this one must be well formed.
    c = oai.chat.completions.create(
        model="gpt-to-claude",
        messages=[
            {"role": "system", "content": "Answer in JSON."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": PNG}},
            ]},
        ],
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}},
        max_tokens=64,
    )
    assert c.choices[0].message.content == TEXT, c


@check
def openai_tool_history_reaches_anthropic_in_its_shape():
    c = oai.chat.completions.create(
        model="gpt-to-claude",
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        ],
        tools=[{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
    )
    assert c.choices[0].message.content == TEXT, c


@check
def openai_responses_answered_by_anthropic():
    r = oai.responses.create(model="gpt-to-claude", input="hi", instructions="Be brief.")
    assert r.output_text == TEXT, r
    assert r.status == "completed", r
    events = list(oai.responses.create(model="gpt-to-claude", input="hi", stream=True))
    assert events[0].type == "response.created", events[0]
    assert events[-1].type == "response.completed", events[-1]
    assert events[-1].response.output_text == TEXT, events[-1]


@check
def anthropic_messages_answered_by_openai():
    raw = ant.messages.with_raw_response.create(model="claude-to-gpt", max_tokens=64, messages=HI)
    m = raw.parse()
    assert m.content[0].text == TEXT, m
    assert m.stop_reason == "end_turn", m
    assert m.usage.input_tokens == 9, m.usage
    assert raw.headers["x-ringside-translated"] == "messages->chat", raw.headers


@check
def anthropic_stream_answered_by_openai():
    with ant.messages.stream(model="claude-to-gpt", max_tokens=64, messages=HI) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == TEXT, text
    assert final.content[0].text == TEXT and final.stop_reason == "end_turn", final


@check
def anthropic_tool_history_reaches_openai_in_its_shape():
    m = ant.messages.create(
        model="claude-to-gpt",
        max_tokens=64,
        tools=[{"name": "weather", "input_schema": {"type": "object"}}],
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}]},
        ],
    )
    assert m.content[0].text == TEXT, m


TOOLS = [{"type": "function", "function": {"name": "weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@check
def openai_tool_round_trip_through_anthropic():
    # The simulator calls the first tool offered, then answers once the result is sent.
    msgs = [{"role": "user", "content": "weather in Paris?"}]
    c = oai.chat.completions.create(model="gpt-to-claude", messages=msgs, tools=TOOLS)
    assert c.choices[0].finish_reason == "tool_calls", c
    call = c.choices[0].message.tool_calls[0]
    assert call.function.name == "weather" and json.loads(call.function.arguments) == {"city": "Paris"}, call
    msgs += [c.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "18C"}]
    final = oai.chat.completions.create(model="gpt-to-claude", messages=msgs, tools=TOOLS)
    assert final.choices[0].message.content == TEXT, final
    # Streamed: the call's id and name on its first chunk, its arguments in pieces.
    calls = {}
    finish = None
    for chunk in oai.chat.completions.create(model="gpt-to-claude", messages=msgs[:1], tools=TOOLS, stream=True):
        if not chunk.choices:
            continue
        for tc in chunk.choices[0].delta.tool_calls or []:
            got = calls.setdefault(tc.index, {"id": tc.id, "name": tc.function.name, "args": ""})
            got["args"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls", finish
    assert list(calls) == [0] and calls[0]["name"] == "weather", calls
    assert json.loads(calls[0]["args"]) == {"city": "Paris"}, calls


@check
def anthropic_tool_round_trip_through_openai():
    tools = [{"name": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    msgs = [{"role": "user", "content": "weather in Paris?"}]
    m = ant.messages.create(model="claude-to-gpt", max_tokens=64, messages=msgs, tools=tools)
    assert m.stop_reason == "tool_use", m
    use = next(b for b in m.content if b.type == "tool_use")
    assert use.name == "weather" and use.input == {"city": "Paris"}, use
    msgs += [{"role": "assistant", "content": [b.model_dump() for b in m.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18C"}]}]
    final = ant.messages.create(model="claude-to-gpt", max_tokens=64, messages=msgs, tools=tools)
    assert final.content[0].text == TEXT, final
    with ant.messages.stream(model="claude-to-gpt", max_tokens=64, messages=msgs[:1], tools=tools) as s:
        streamed = s.get_final_message()
    use = next(b for b in streamed.content if b.type == "tool_use")
    assert use.input == {"city": "Paris"} and streamed.stop_reason == "tool_use", streamed


@check
def openai_stream_cut_after_a_fallback_raises():
    seen = []
    try:
        for chunk in oai.chat.completions.create(model="gpt-to-claude-cut", messages=HI, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                seen.append(chunk.choices[0].delta.content)
    except openai.APIError as e:
        assert "upstream" in str(e), e
        assert seen, "the events before the cut arrive first"
    else:
        raise AssertionError(f"a stream cut mid-way ended quietly after {seen}")


@check
def anthropic_stream_cut_after_a_fallback_raises():
    seen = []
    try:
        with ant.messages.stream(model="claude-to-gpt-cut", max_tokens=64, messages=HI) as s:
            for t in s.text_stream:
                seen.append(t)
    except anthropic.APIError as e:
        assert "upstream" in str(e), e
        assert seen, "the events before the cut arrive first"
    else:
        raise AssertionError(f"a stream cut mid-way ended quietly after {seen}")


failed = []
for f in CHECKS:
    try:
        f()
        print(f"ok   {f.__name__}")
    except Exception:
        failed.append(f.__name__)
        print(f"FAIL {f.__name__}\n{traceback.format_exc()}")
print(f"{len(CHECKS) - len(failed)} of {len(CHECKS)} translation checks passed")
sys.exit(1 if failed else 0)
