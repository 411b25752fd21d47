//! Realistic bodies: OpenAI chat completions, legacy completions, Responses API, embeddings and
//! Anthropic messages, as JSON or as the SSE event sequences the real APIs send.

use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completions,
    Responses,
    Embeddings,
    Messages,
    CountTokens,
    Models,
    /// Google Gemini's `generateContent` (`:streamGenerateContent?alt=sse` streams).
    Gemini,
}

impl Api {
    pub fn from_path(path: &str) -> Option<Api> {
        let p = path.split('?').next().unwrap_or(path);
        let p = p.trim_end_matches('/');
        Some(if super::gemini::call(path).is_some() {
            Api::Gemini
        } else if p.ends_with("/chat/completions") {
            Api::Chat
        } else if p.ends_with("/messages/count_tokens") {
            Api::CountTokens
        } else if p.ends_with("/messages") {
            Api::Messages
        } else if p.ends_with("/completions") {
            Api::Completions
        } else if p.ends_with("/responses") {
            Api::Responses
        } else if p.ends_with("/embeddings") {
            Api::Embeddings
        } else if p.ends_with("/models") {
            Api::Models
        } else {
            return None;
        })
    }

    pub fn anthropic(self) -> bool {
        matches!(self, Api::Messages | Api::CountTokens)
    }
}

const WORDS: [&str; 8] = [
    "Hello",
    " from",
    " the",
    " Ringside",
    " upstream",
    " simulator",
    ",",
    " friend",
];

pub fn word(i: u32) -> &'static str {
    WORDS[i as usize % WORDS.len()]
}

/// The simulator's embedding vector.
const EMBEDDING: [f64; 8] = [0.011, -0.022, 0.033, 0.044, -0.055, 0.066, 0.077, -0.088];

/// A whole (non-streaming) JSON answer. `base64`: the request asked for
/// `encoding_format: "base64"` (the OpenAI SDKs' default), answered as OpenAI does: the
/// little-endian float32s of the vector, base64-encoded.
pub fn json_body(api: Api, model: &str, n: u32, seq: u64, base64: bool) -> Vec<u8> {
    let text: String = (0..n).map(word).collect();
    let v = match api {
        Api::Chat => {
            // Written by hand, not through `json!`: this is the benchmarks' answer, and the
            // simulator shares the cores with the proxy under test (a `Value` tree cost it
            // about a fifth of its CPU per request).
            let (model, text) = (quoted(model), quoted(&text));
            return format!(
                "{{\"id\":\"chatcmpl-sim{seq}\",\"object\":\"chat.completion\",\"created\":1700000000,\
                 \"model\":{model},\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\
                 \"content\":{text}}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":9,\
                 \"completion_tokens\":{n},\"total_tokens\":{t}}}}}",
                t = 9 + n
            )
            .into_bytes();
        }
        Api::Completions => json!({
            "id": format!("cmpl-sim{seq}"), "object": "text_completion", "created": 1_700_000_000u64, "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": null}],
            "usage": {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}
        }),
        Api::Responses => json!({
            "id": format!("resp_sim{seq}"), "object": "response", "created_at": 1_700_000_000u64, "status": "completed", "model": model,
            "output": [{"type": "message", "id": format!("msg_sim{seq}"), "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 9, "output_tokens": n, "total_tokens": 9 + n}
        }),
        Api::Embeddings => json!({
            "object": "list", "model": model,
            "data": [{"object": "embedding", "index": 0, "embedding": if base64 {
                use base64::Engine;
                let bytes: Vec<u8> = EMBEDDING.iter().flat_map(|f| (*f as f32).to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(EMBEDDING)
            }}],
            "usage": {"prompt_tokens": 4, "total_tokens": 4}
        }),
        Api::Messages => json!({
            "id": format!("msg_sim{seq}"), "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 9, "output_tokens": n}
        }),
        Api::CountTokens => json!({"input_tokens": 9}),
        Api::Gemini => super::gemini::answer(model, &text, n, seq),
        Api::Models => {
            json!({"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "simulator"}]})
        }
    };
    serde_json::to_vec(&v).unwrap_or_default()
}

/// `s` as a JSON string literal, quotes and escapes included.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn named(kind: &str, v: serde_json::Value) -> Vec<u8> {
    format!("event: {kind}\ndata: {v}\n\n").into_bytes()
}

/// The SSE events of a streamed answer with `n` text deltas, in order, terminal marker last.
pub fn sse_events(api: Api, model: &str, n: u32, seq: u64, include_usage: bool) -> Vec<Vec<u8>> {
    let mut ev = Vec::new();
    match api {
        Api::Chat | Api::Completions | Api::Embeddings | Api::Models | Api::CountTokens => {
            chat_events(&mut ev, model, n, seq, include_usage)
        }
        Api::Responses => responses_events(&mut ev, model, n, seq),
        Api::Messages => messages_events(&mut ev, model, n, seq),
        Api::Gemini => super::gemini::events(&mut ev, model, n, seq),
    }
    ev
}

/// Chat Completions chunks (by hand, as in `json_body`: the benchmarks' stream).
fn chat_events(ev: &mut Vec<Vec<u8>>, model: &str, n: u32, seq: u64, include_usage: bool) {
    let head = format!(
        "data: {{\"id\":\"chatcmpl-sim{seq}\",\"object\":\"chat.completion.chunk\",\
         \"created\":1700000000,\"model\":{},\"system_fingerprint\":\"fp_sim\",\"choices\":",
        quoted(model)
    );
    let chunk = |delta: &str, finish: &str| {
        let mut e = String::with_capacity(head.len() + delta.len() + 64);
        e.push_str(&head);
        e.push_str("[{\"index\":0,\"delta\":");
        e.push_str(delta);
        e.push_str(",\"logprobs\":null,\"finish_reason\":");
        e.push_str(finish);
        e.push_str("}]}\n\n");
        e.into_bytes()
    };
    ev.push(chunk(r#"{"role":"assistant","content":""}"#, "null"));
    for i in 0..n {
        ev.push(chunk(
            &format!("{{\"content\":{}}}", quoted(word(i))),
            "null",
        ));
    }
    ev.push(chunk("{}", r#""stop""#));
    if include_usage {
        let t = 9 + n;
        ev.push(format!("{head}[],\"usage\":{{\"prompt_tokens\":9,\"completion_tokens\":{n},\"total_tokens\":{t}}}}}\n\n").into_bytes());
    }
    ev.push(b"data: [DONE]\n\n".to_vec());
}

/// The Responses API's typed events.
fn responses_events(ev: &mut Vec<Vec<u8>>, model: &str, n: u32, seq: u64) {
    let rid = format!("resp_sim{seq}");
    let mid = format!("msg_sim{seq}");
    let base = json!({"id": rid, "object": "response", "created_at": 1_700_000_000u64, "status": "in_progress", "model": model, "output": []});
    ev.push(named(
        "response.created",
        json!({"type": "response.created", "sequence_number": 0, "response": base}),
    ));
    ev.push(named(
        "response.in_progress",
        json!({"type": "response.in_progress", "sequence_number": 1, "response": base}),
    ));
    ev.push(named("response.output_item.added", json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
        "item": {"type": "message", "id": mid, "status": "in_progress", "role": "assistant", "content": []}})));
    ev.push(named("response.content_part.added", json!({"type": "response.content_part.added", "sequence_number": 3, "item_id": mid,
        "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})));
    let mut text = String::new();
    for i in 0..n {
        text.push_str(word(i));
        ev.push(named(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "sequence_number": 4 + i,
            "item_id": mid, "output_index": 0, "content_index": 0, "delta": word(i)}),
        ));
    }
    let s = 4 + n;
    ev.push(named(
        "response.output_text.done",
        json!({"type": "response.output_text.done", "sequence_number": s, "item_id": mid,
        "output_index": 0, "content_index": 0, "text": text}),
    ));
    let part = json!({"type": "output_text", "text": text, "annotations": []});
    ev.push(named(
        "response.content_part.done",
        json!({"type": "response.content_part.done", "sequence_number": s + 1,
        "item_id": mid, "output_index": 0, "content_index": 0, "part": part}),
    ));
    let item = json!({"type": "message", "id": mid, "status": "completed", "role": "assistant", "content": [part]});
    ev.push(named("response.output_item.done", json!({"type": "response.output_item.done", "sequence_number": s + 2, "output_index": 0, "item": item})));
    let done = json!({"id": rid, "object": "response", "created_at": 1_700_000_000u64, "status": "completed", "model": model,
        "output": [item], "usage": {"input_tokens": 9, "output_tokens": n, "total_tokens": 9 + n}});
    ev.push(named(
        "response.completed",
        json!({"type": "response.completed", "sequence_number": s + 3, "response": done}),
    ));
}

/// Anthropic Messages events.
fn messages_events(ev: &mut Vec<Vec<u8>>, model: &str, n: u32, seq: u64) {
    let mid = format!("msg_sim{seq}");
    ev.push(named("message_start", json!({"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 9, "output_tokens": 1}}})));
    ev.push(named("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
    ev.push(named("ping", json!({"type": "ping"})));
    for i in 0..n {
        ev.push(named("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word(i)}})));
    }
    ev.push(named(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    ev.push(named("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": n}})));
    ev.push(named("message_stop", json!({"type": "message_stop"})));
}

/// An error body in the API's dialect.
pub fn error_body(api: Api, status: u16, message: &str) -> Vec<u8> {
    let (otype, atype) = match status {
        400 => ("invalid_request_error", "invalid_request_error"),
        401 => ("authentication_error", "authentication_error"),
        403 => ("permission_error", "permission_error"),
        404 => ("invalid_request_error", "not_found_error"),
        429 => ("rate_limit_error", "rate_limit_error"),
        529 => ("server_error", "overloaded_error"),
        _ => ("server_error", "api_error"),
    };
    let v = if api.anthropic() {
        json!({"type": "error", "error": {"type": atype, "message": message}})
    } else if api == Api::Gemini {
        super::gemini::error(status, message)
    } else {
        json!({"error": {"message": message, "type": otype, "param": null, "code": null}})
    };
    serde_json::to_vec(&v).unwrap_or_default()
}

/// A 400 that quotes the request's first message role back, in each provider's own wording
/// (OpenAI's invalid enum value, Anthropic's validation error).
pub fn quoting_error(api: Api, request: &[u8]) -> Vec<u8> {
    let v: serde_json::Value = serde_json::from_slice(request).unwrap_or_default();
    let role = v["messages"][0]["role"].as_str().unwrap_or("");
    let v = if api.anthropic() {
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": format!("messages.0.role: Input should be 'user' or 'assistant' (got '{role}')")}})
    } else {
        json!({"error": {"message": format!("Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', and 'tool'."),
            "type": "invalid_request_error", "param": "messages[0].role", "code": "invalid_value"}})
    };
    serde_json::to_vec(&v).unwrap_or_default()
}

pub fn default_message(status: u16) -> &'static str {
    match status {
        429 => "Rate limit reached for requests. Please try again later.",
        500 => "The server had an error while processing your request.",
        503 => "The engine is currently overloaded, please try again later.",
        529 => "Overloaded",
        401 => "Incorrect API key provided.",
        400 => "Invalid request.",
        _ => "Simulated upstream error.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const APIS: [Api; 7] = [
        Api::Chat,
        Api::Completions,
        Api::Responses,
        Api::Embeddings,
        Api::Messages,
        Api::CountTokens,
        Api::Models,
    ];
    /// A model name that needs escaping in JSON.
    const ODD_MODEL: &str = "m\"odel\\\n/é";

    fn data_of(ev: &[u8]) -> Value {
        let text = std::str::from_utf8(ev).unwrap();
        assert!(text.ends_with("\n\n"), "{text:?}");
        let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
    }

    #[test]
    fn every_body_is_json_with_the_model_escaped() {
        for api in APIS {
            for base64 in [false, true] {
                let v: Value = serde_json::from_slice(&json_body(api, ODD_MODEL, 3, 7, base64))
                    .unwrap_or_else(|e| panic!("{api:?}: {e}"));
                if !matches!(api, Api::CountTokens | Api::Models) {
                    assert_eq!(v["model"], ODD_MODEL, "{api:?}");
                }
            }
        }
        let chat: Value = serde_json::from_slice(&json_body(Api::Chat, "m", 3, 7, false)).unwrap();
        assert_eq!(chat["id"], "chatcmpl-sim7");
        assert_eq!(chat["choices"][0]["message"]["content"], "Hello from the");
        assert_eq!(chat["choices"][0]["finish_reason"], "stop");
        assert_eq!(chat["usage"]["total_tokens"], 12);
    }

    #[test]
    fn every_stream_event_is_json() {
        for api in APIS {
            for usage in [false, true] {
                for ev in sse_events(api, ODD_MODEL, 3, 7, usage) {
                    if ev != b"data: [DONE]\n\n" {
                        data_of(&ev);
                    }
                }
            }
        }
    }

    #[test]
    fn a_chat_stream_reads_as_openai_sends_it() {
        let evs = sse_events(Api::Chat, ODD_MODEL, 3, 7, true);
        assert_eq!(evs.len(), 1 + 3 + 1 + 1 + 1);
        let first = data_of(&evs[0]);
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["model"], ODD_MODEL);
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
        let text: String = evs[1..4]
            .iter()
            .map(|e| {
                data_of(e)["choices"][0]["delta"]["content"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(text, "Hello from the");
        assert_eq!(data_of(&evs[4])["choices"][0]["finish_reason"], "stop");
        let usage = data_of(&evs[5]);
        assert_eq!(usage["choices"], serde_json::json!([]));
        assert_eq!(usage["usage"]["completion_tokens"], 3);
        assert_eq!(evs[6], b"data: [DONE]\n\n");
    }
}
