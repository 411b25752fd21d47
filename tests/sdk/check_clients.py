"""The real OpenAI and Anthropic Python SDKs against a running Ringside (tests/sdk_clients.rs).

Usage: check_clients.py http://127.0.0.1:PORT

The proxy in front of the simulator is configured by the Rust test: model `gpt-4o-mini` has a
rate-limited key first and a healthy key second; `gpt-mid` and `claude-mid` reset their streams
after five events; `gpt-dead` answers 429 on every key; `claude-sonnet-4-5` is healthy.
Every check runs; the failures are listed at the end and the exit status is 1 if there was one.
"""

import sys
import traceback
import warnings

import anthropic
import openai

warnings.simplefilter("ignore")  # model deprecation notices from the SDKs
BASE = sys.argv[1]
oai = openai.OpenAI(base_url=BASE + "/v1", api_key="client-key", max_retries=0, timeout=20)
ant = anthropic.Anthropic(base_url=BASE, api_key="client-key", max_retries=0, timeout=20)
HI = [{"role": "user", "content": "hi"}]
# Clients that give up on a read after a second, and an upstream that takes 2.5 s to answer.
oai_impatient = openai.OpenAI(base_url=BASE + "/v1", api_key="client-key", max_retries=0, timeout=1.0)
ant_impatient = anthropic.Anthropic(base_url=BASE, api_key="client-key", max_retries=0, timeout=1.0)
SLOW = {"x-sim-latency-ms": "2500"}
TEXT = "Hello from the Ringside upstream simulator, friend"
BIG = "x" * (17 << 20)  # over the default max_body_bytes (16 MiB)
CHECKS = []


def check(f):
    CHECKS.append(f)
    return f


@check
def openai_models_list():
    ids = [m.id for m in oai.models.list()]
    assert "gpt-4o-mini" in ids and "claude-sonnet-4-5" in ids, ids


@check
def openai_models_retrieve():
    assert oai.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
    assert oai.models.retrieve("oai/gpt-4o-mini").id == "oai/gpt-4o-mini"
    try:
        oai.models.retrieve("no-such-model")
    except openai.NotFoundError as e:
        assert e.code == "model_not_found", e.body
    else:
        raise AssertionError("no error for an unknown model")


@check
def openai_chat_fails_over_a_rate_limited_key():
    raw = oai.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=HI)
    c = raw.parse()
    assert c.choices[0].message.content == TEXT, c
    assert c.usage.total_tokens > 0, c.usage
    assert raw.headers["x-ringside-connection"] == "oai/healthy", raw.headers
    # The SDK's request id is ours (x-request-id), the upstream's is kept beside it.
    assert c._request_id and c._request_id.startswith("rs-"), c._request_id
    assert raw.headers["x-upstream-request-id"].startswith("req_sim"), raw.headers


@check
def openai_chat_stream_with_usage():
    parts, usage = [], None
    for chunk in oai.chat.completions.create(
        model="gpt-4o-mini", messages=HI, stream=True, stream_options={"include_usage": True}
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
    assert "".join(parts) == TEXT, parts
    assert usage is not None and usage.completion_tokens > 0, usage


@check
def openai_completions_and_embeddings():
    assert oai.completions.create(model="gpt-4o-mini", prompt="hi").choices[0].text == TEXT
    # The SDK asks for base64 (the simulator answers as OpenAI does) and decodes it.
    e = oai.embeddings.create(model="gpt-4o-mini", input="hi")
    v = e.data[0].embedding
    assert len(v) == 8 and abs(v[0] - 0.011) < 1e-6 and abs(v[7] + 0.088) < 1e-6, v
    v = oai.embeddings.create(model="gpt-4o-mini", input="hi", encoding_format="float").data[0].embedding
    assert v[:2] == [0.011, -0.022], v


@check
def openai_responses_plain_and_streamed():
    assert oai.responses.create(model="gpt-4o-mini", input="hi").output_text == TEXT
    types = []
    with oai.responses.stream(model="gpt-4o-mini", input="hi") as s:
        for ev in s:
            types.append(ev.type)
        final = s.get_final_response()
    assert types[0] == "response.created" and types[-1] == "response.completed", types
    assert final.output_text == TEXT, final


@check
def openai_unknown_model_is_a_not_found_error():
    try:
        oai.chat.completions.create(model="no-such-model", messages=HI)
    except openai.NotFoundError as e:
        assert e.code == "model_not_found", e.body
        assert e.request_id and e.request_id.startswith("rs-"), e.request_id
        assert "no-such-model" in e.message, e.message
    else:
        raise AssertionError("no error for an unknown model")


@check
def openai_every_key_limited_is_a_clear_503():
    try:
        oai.chat.completions.create(model="gpt-dead", messages=HI)
    except openai.APIStatusError as e:
        assert e.status_code in (429, 503), e.status_code
        assert e.response.headers.get("retry-after"), e.response.headers
        assert e.request_id and e.request_id.startswith("rs-"), e.request_id
    else:
        raise AssertionError("no error when every key is rate limited")


@check
def openai_stream_cut_mid_way_raises():
    seen = []
    try:
        for chunk in oai.chat.completions.create(model="gpt-mid", messages=HI, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                seen.append(chunk.choices[0].delta.content)
    except openai.APIError as e:
        assert "upstream" in str(e), e
        assert seen, "the events before the cut arrive first"
    else:
        raise AssertionError(f"a stream cut mid-way ended quietly after {seen}")


@check
def openai_oversize_body_is_a_413_not_a_connection_error():
    # The SDK writes the whole body before it reads: Ringside answers early, then reads on.
    try:
        oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": BIG}])
    except openai.APIStatusError as e:
        assert e.status_code == 413 and e.code == "request_too_large", (e.status_code, e.body)
    else:
        raise AssertionError("a body over max_body_bytes was accepted")


@check
def anthropic_messages_create():
    m = ant.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=HI)
    assert m.content[0].text == TEXT and m.stop_reason == "end_turn", m
    assert m._request_id and m._request_id.startswith("req_sim"), m._request_id


@check
def anthropic_stream_helper():
    with ant.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=HI) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == TEXT, text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0, final


@check
def anthropic_models_list_and_retrieve():
    ids = [m.id for m in ant.models.list()]
    assert "claude-sonnet-4-5" in ids, ids
    assert ant.models.retrieve("claude-sonnet-4-5").id == "claude-sonnet-4-5"
    try:
        ant.models.retrieve("claude-no-such")
    except anthropic.NotFoundError as e:
        assert e.body["error"]["type"] == "not_found_error", e.body
    else:
        raise AssertionError("no error for an unknown model")


@check
def anthropic_count_tokens():
    n = ant.messages.count_tokens(model="claude-sonnet-4-5", messages=HI)
    assert n.input_tokens > 0, n


@check
def anthropic_unknown_model_is_a_not_found_error():
    try:
        ant.messages.create(model="claude-no-such", max_tokens=8, messages=HI)
    except anthropic.NotFoundError as e:
        assert e.body["error"]["type"] == "not_found_error", e.body
        # Anthropic's SDK reads the id from `request-id`.
        assert e.request_id and e.request_id.startswith("rs-"), e.request_id
    else:
        raise AssertionError("no error for an unknown model")


@check
def anthropic_stream_cut_mid_way_raises():
    seen = []
    try:
        with ant.messages.stream(model="claude-mid", max_tokens=64, messages=HI) as s:
            for t in s.text_stream:
                seen.append(t)
    except anthropic.APIError as e:
        assert "upstream" in str(e), e
        assert seen, "the events before the cut arrive first"
    else:
        raise AssertionError(f"a stream cut mid-way ended quietly after {seen}")


@check
def anthropic_oversize_body_is_a_413_not_a_connection_error():
    try:
        ant.messages.create(
            model="claude-sonnet-4-5", max_tokens=8, messages=[{"role": "user", "content": BIG}]
        )
    except anthropic.APIStatusError as e:
        assert e.status_code == 413, (e.status_code, e.body)
        assert e.body["error"]["type"] == "request_too_large", e.body
    else:
        raise AssertionError("a body over max_body_bytes was accepted")


@check
def openai_stream_kept_alive_past_a_short_read_timeout():
    # Route `patient` keeps a waiting stream alive every 300 ms (`keepalive_ms`).
    parts = []
    for chunk in oai_impatient.chat.completions.create(
        model="patient", messages=HI, stream=True, extra_headers=SLOW
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    assert "".join(parts) == TEXT, parts
    # The same wait on a route without keep-alives: the client gives up, as it would without
    # Ringside's help (so the check above is not one that cannot fail).
    try:
        for _ in oai_impatient.chat.completions.create(
            model="gpt-4o-mini", messages=HI, stream=True, extra_headers=SLOW
        ):
            pass
    except openai.APITimeoutError:
        pass
    else:
        raise AssertionError("a silent 2.5 s wait did not time a 1 s read timeout out")


@check
def anthropic_stream_kept_alive_past_a_short_read_timeout():
    with ant_impatient.messages.stream(
        model="patient-claude", max_tokens=64, messages=HI, extra_headers=SLOW
    ) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == TEXT, text
    assert final.stop_reason == "end_turn", final


failed = []
for f in CHECKS:
    try:
        f()
        print(f"ok   {f.__name__}")
    except Exception:
        failed.append(f.__name__)
        print(f"FAIL {f.__name__}\n{traceback.format_exc()}")
print(f"{len(CHECKS) - len(failed)} of {len(CHECKS)} SDK checks passed")
sys.exit(1 if failed else 0)
