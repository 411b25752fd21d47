use super::{Standing, Translator};
use crate::translate::Api;
use serde_json::Value;

/// Anthropic's documented stream of a tool call, with a ping.
const ANTHROPIC: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_014p7gG3wDgGV9EUtLvnow3U\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":2,\"cache_read_input_tokens\":28},\"content\":[],\"stop_reason\":null}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay, let\\u2019s check\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"name\":\"get_weather\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"location\\\": \\\"San Fra\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ncisco, CA\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// OpenAI's Chat stream with two parallel calls (ids on the first fragment, CRLF line ends),
/// then the finish and the usage chunk.
const CHAT: &str = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\r\n\r\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Sure\"},\"finish_reason\":null}]}\r\n\r\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\r\n\r\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"x\\\":\"}}]},\"finish_reason\":null}]}\r\n\r\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]},\"finish_reason\":null}]}\r\n\r\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\r\n\r\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":12,\"total_tokens\":42,\"prompt_tokens_details\":{\"cached_tokens\":10}}}\r\n\r\n\
data: [DONE]\r\n\r\n";

/// Gemini frames: text, then two calls without ids in separate frames, no end marker.
const GEMINI: &str = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]}}],\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"g1\"}\n\n\
data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"lo\"},{\"functionCall\":{\"name\":\"f\",\"args\":{\"x\":1}}}]}}]}\n\n\
data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"g\",\"args\":{}}}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":6,\"thoughtsTokenCount\":2}}\n\n";

/// A Responses stream: text, then a call, completed with usage.
const RESPONSES: &str = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\",\"status\":\"in_progress\",\"output\":[]}}\n\n\
event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\"}}\n\n\
event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi \\\"there\\\"\"}\n\n\
event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_z\",\"name\":\"f\",\"arguments\":\"\"}}\n\n\
event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":1,\"delta\":\"{\\\"q\\\":true}\"}\n\n\
event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"type\":\"message\"},{\"type\":\"function_call\"}],\"usage\":{\"input_tokens\":11,\"output_tokens\":7,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens_details\":{\"reasoning_tokens\":0}}}}\n\n";

fn run(from: Api, to: Api, upstream: &str) -> (String, Standing) {
    let mut t = Translator::new(
        from,
        to,
        "client-model",
        "req-1",
        7,
        true,
        Default::default(),
    );
    let mut out = Vec::new();
    t.feed(upstream.as_bytes(), &mut out);
    let s = t.finish(&mut out);
    (String::from_utf8(out).unwrap(), s)
}

/// The client's events: (name, data as JSON; `[DONE]` as a string).
fn events(s: &str) -> Vec<(String, Value)> {
    s.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            let mut name = String::new();
            let mut data = String::new();
            for line in b.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = d.to_string();
                }
            }
            let v = serde_json::from_str(&data).unwrap_or(Value::String(data));
            (name, v)
        })
        .collect()
}

/// A tool call as a Chat client assembles it: id, name, arguments.
type Call = (String, String, String);

/// A Chat client's view: text, tool calls by index, finish, usage, whether `[DONE]` came.
fn chat_view(s: &str) -> (String, Vec<Call>, String, Value, bool) {
    let (mut text, mut calls, mut finish, mut usage, mut done) = (
        String::new(),
        Vec::<Call>::new(),
        String::new(),
        Value::Null,
        false,
    );
    for (_, v) in events(s) {
        if v == "[DONE]" {
            done = true;
            continue;
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            usage = u.clone();
        }
        let Some(c) = v.pointer("/choices/0") else {
            continue;
        };
        text.push_str(
            c.pointer("/delta/content")
                .and_then(Value::as_str)
                .unwrap_or(""),
        );
        for tc in c
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let i = tc["index"].as_u64().unwrap() as usize;
            if let Some(id) = tc["id"].as_str() {
                assert_eq!(i, calls.len(), "indexes count up from 0");
                calls.push((
                    id.into(),
                    tc["function"]["name"].as_str().unwrap().into(),
                    String::new(),
                ));
            }
            calls[i]
                .2
                .push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
        }
        if let Some(f) = c["finish_reason"].as_str() {
            finish = f.into();
        }
    }
    (text, calls, finish, usage, done)
}

#[test]
fn anthropic_stream_for_a_chat_client() {
    let (out, standing) = run(Api::Messages, Api::Chat, ANTHROPIC);
    assert_eq!(standing, Standing::Ended);
    let (text, calls, finish, usage, done) = chat_view(&out);
    assert_eq!(text, "Okay, let\u{2019}s check");
    assert_eq!(
        calls,
        vec![(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            "get_weather".into(),
            "{\"location\": \"San Francisco, CA\"}".into()
        )]
    );
    assert_eq!(finish, "tool_calls");
    assert_eq!(usage["prompt_tokens"], 500);
    assert_eq!(usage["completion_tokens"], 89);
    assert!(done && out.ends_with("data: [DONE]\n\n"));
    let first = &events(&out)[0].1;
    assert_eq!(first["model"], "client-model");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
}

#[test]
fn gemini_frames_for_a_chat_client_count_calls_across_frames() {
    let (out, standing) = run(Api::Gemini, Api::Chat, GEMINI);
    assert_eq!(standing, Standing::Ended, "a finish reason is Gemini's end");
    let (text, calls, finish, usage, _) = chat_view(&out);
    assert_eq!(text, "Hello");
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].0, calls[1].0);
    assert_eq!(
        (calls[0].2.as_str(), calls[1].2.as_str()),
        ("{\"x\":1}", "{}")
    );
    assert_eq!(finish, "tool_calls");
    assert_eq!(usage["completion_tokens"], 8);
}

#[test]
fn chat_stream_for_an_anthropic_client() {
    let (out, standing) = run(Api::Chat, Api::Messages, CHAT);
    assert_eq!(standing, Standing::Ended);
    let evs = events(&out);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    for (name, v) in &evs {
        assert_eq!(
            v["type"],
            name.as_str(),
            "the data's type repeats the event's name"
        );
    }
    assert_eq!(evs[0].1["message"]["model"], "client-model");
    assert_eq!(
        evs[4].1["content_block"],
        serde_json::json!({"type": "tool_use", "id": "call_a", "name": "f", "input": {}})
    );
    assert_eq!(evs[8].1["index"], 2);
    let args: String = [5, 6]
        .iter()
        .map(|&i| evs[i].1["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(args, "{\"x\":1}");
    // The stop reason waited for OpenAI's usage chunk, which comes after the finish.
    assert_eq!(evs[11].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(evs[11].1["usage"]["input_tokens"], 20);
    assert_eq!(evs[11].1["usage"]["cache_read_input_tokens"], 10);
    assert_eq!(evs[11].1["usage"]["output_tokens"], 12);
}

#[test]
fn streams_for_a_responses_client() {
    for (from, upstream) in [
        (Api::Chat, CHAT),
        (Api::Messages, ANTHROPIC),
        (Api::Gemini, GEMINI),
    ] {
        let (out, standing) = run(from, Api::Responses, upstream);
        assert_eq!(standing, Standing::Ended, "{from:?}");
        let evs = events(&out);
        for (i, (name, v)) in evs.iter().enumerate() {
            assert_eq!(v["type"], name.as_str());
            assert_eq!(v["sequence_number"], i as u64, "{from:?}");
        }
        assert_eq!(evs[0].0, "response.created");
        let (last, v) = evs.last().unwrap();
        assert_eq!(last, "response.completed", "{from:?}");
        let r = &v["response"];
        assert_eq!(r["model"], "client-model");
        let output = r["output"].as_array().unwrap();
        assert_eq!(output[0]["type"], "message");
        assert!(
            output
                .iter()
                .any(|o| o["type"] == "function_call" && o["status"] == "completed")
        );
        assert!(r["usage"]["output_tokens"].as_u64().unwrap() > 0);
        // Each delta's item was added before it and done after it.
        let added = evs
            .iter()
            .position(|(n, _)| n == "response.output_item.added")
            .unwrap();
        let delta = evs
            .iter()
            .position(|(n, _)| n == "response.output_text.delta")
            .unwrap();
        let done = evs
            .iter()
            .position(|(n, _)| n == "response.output_text.done")
            .unwrap();
        assert!(added < delta && delta < done, "{from:?}");
    }
}

#[test]
fn responses_stream_for_an_anthropic_client() {
    let (out, _) = run(Api::Responses, Api::Messages, RESPONSES);
    let evs = events(&out);
    assert_eq!(evs[2].1["delta"]["text"], "Hi \"there\"");
    assert_eq!(evs[4].1["content_block"]["id"], "call_z");
    assert_eq!(evs[5].1["delta"]["partial_json"], "{\"q\":true}");
    let md = &evs[evs.len() - 2].1;
    assert_eq!(md["delta"]["stop_reason"], "tool_use");
    assert_eq!(md["usage"]["input_tokens"], 11);
}

#[test]
fn the_same_bytes_split_anywhere_translate_the_same() {
    let streams = [
        (Api::Messages, ANTHROPIC),
        (Api::Chat, CHAT),
        (Api::Gemini, GEMINI),
        (Api::Responses, RESPONSES),
    ];
    for (from, upstream) in streams {
        for to in [Api::Chat, Api::Messages, Api::Responses] {
            let (whole, _) = run(from, to, upstream);
            let bytes = upstream.as_bytes();
            for cut in 1..bytes.len() {
                let mut t = Translator::new(
                    from,
                    to,
                    "client-model",
                    "req-1",
                    7,
                    true,
                    Default::default(),
                );
                let mut out = Vec::new();
                t.feed(&bytes[..cut], &mut out);
                t.feed(&bytes[cut..], &mut out);
                t.finish(&mut out);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    whole,
                    "{from:?} -> {to:?} cut at {cut}"
                );
            }
        }
    }
}

#[test]
fn an_error_inside_the_stream_is_the_client_apis_error_event() {
    let upstream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n\
event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let (out, standing) = run(Api::Messages, Api::Chat, upstream);
    assert_eq!(standing, Standing::Failed);
    let (_, last) = events(&out).pop().unwrap();
    assert_eq!(last["error"]["message"], "Overloaded");
    assert!(!out.contains("[DONE]"), "nothing after the error: {out}");
    let (out, _) = run(Api::Messages, Api::Responses, upstream);
    assert_eq!(events(&out).pop().unwrap().0, "response.failed");
    let chat_err = "data: {\"error\":{\"message\":\"boom\"}}\n\n";
    let (out, standing) = run(Api::Chat, Api::Messages, chat_err);
    assert_eq!(standing, Standing::Failed);
    assert_eq!(events(&out).pop().unwrap().0, "error");
}

#[test]
fn a_stream_cut_short_stays_open_for_the_caller_to_end() {
    let cut = &ANTHROPIC[..ANTHROPIC.find("event: message_delta").unwrap()];
    assert_eq!(run(Api::Messages, Api::Chat, cut).1, Standing::Open);
    let cut = &CHAT[..CHAT.find("data: [DONE]").unwrap()];
    assert_eq!(run(Api::Chat, Api::Responses, cut).1, Standing::Open);
    // Gemini without a finish reason was cut too.
    let cut = &GEMINI[..GEMINI.rfind("data: ").unwrap()];
    assert_eq!(run(Api::Gemini, Api::Chat, cut).1, Standing::Open);
}
