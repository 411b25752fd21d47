//! Google Gemini as the simulator speaks it: the path that names the model and the method,
//! answers whole and as `alt=sse` frames, errors with Google's status names.

use super::body::word;
use serde_json::{Value, json};

/// A Gemini path's model and whether it streams: `…/models/{model}:generateContent` or
/// `…/models/{model}:streamGenerateContent`.
pub fn call(path: &str) -> Option<(&str, bool)> {
    let p = path.split('?').next().unwrap_or(path);
    let (before, method) = p.rsplit_once(':')?;
    let model = before.rsplit_once("/models/")?.1;
    match method {
        "generateContent" => Some((model, false)),
        "streamGenerateContent" => Some((model, true)),
        _ => None,
    }
}

/// A whole `generateContent` answer.
pub fn answer(model: &str, text: &str, n: u32, seq: u64) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": n, "totalTokenCount": 9 + n},
        "modelVersion": model, "responseId": format!("gem-sim{seq}")
    })
}

/// Gemini's frames: each a whole `GenerateContentResponse` with one text part; the last has the
/// finish reason and the usage. No end marker: the body's end is the stream's.
pub fn events(ev: &mut Vec<Vec<u8>>, model: &str, n: u32, seq: u64) {
    for i in 0..n.max(1) {
        let mut frame = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": word(i)}]}, "index": 0}],
            "modelVersion": model, "responseId": format!("gem-sim{seq}")});
        if i + 1 == n.max(1) {
            frame["candidates"][0]["finishReason"] = "STOP".into();
            frame["usageMetadata"] =
                json!({"promptTokenCount": 9, "candidatesTokenCount": n, "totalTokenCount": 9 + n});
        }
        ev.push(format!("data: {frame}\r\n\r\n").into_bytes());
    }
}

/// Google's error body: the status code, the message and the status name.
pub fn error(status: u16, message: &str) -> Value {
    let name = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    json!({"error": {"code": status, "message": message, "status": name}})
}
