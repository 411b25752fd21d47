//! Errors Ringside itself produces, rendered in the client's dialect with a stable `code`.

use super::{Dialect, Endpoint};
use serde_json::json;

/// An error answer: status, stable code, human message and retry guidance.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Seconds; sent as `Retry-After` where waiting helps.
    pub retry_after: Option<u64>,
    /// `x-should-retry` (the OpenAI and Anthropic SDKs honour it).
    pub should_retry: Option<bool>,
    /// Seconds until a spent budget's period starts again: sent as `Retry-After` even with
    /// `x-should-retry: false` (the SDKs read the latter first and do not retry; the wait is
    /// for whoever decides when to come back).
    pub reset_after: Option<u64>,
    /// Extra fields merged into the error object (diagnostics). Boxed: rare, and an error
    /// travels in `Result`s on the request path.
    pub extra: Option<Box<serde_json::Value>>,
    /// Extra response headers (e.g. the decision record).
    pub extra_headers: Vec<(&'static str, String)>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            should_retry: None,
            reset_after: None,
            extra: None,
            extra_headers: Vec::new(),
        }
    }
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.extra_headers.push((name, value.into()));
        self
    }
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs.max(1));
        self
    }
    pub fn reset_after(mut self, secs: u64) -> Self {
        self.reset_after = Some(secs.max(1));
        self
    }
    pub fn should_retry(mut self, v: bool) -> Self {
        self.should_retry = Some(v);
        self
    }
    /// Merge fields into the error object (later calls add to earlier ones).
    pub fn extra(mut self, v: serde_json::Value) -> Self {
        match (self.extra.as_deref_mut(), v) {
            (Some(serde_json::Value::Object(have)), serde_json::Value::Object(add)) => {
                have.extend(add);
            }
            (_, v) => self.extra = Some(Box::new(v)),
        }
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(400, code, message).should_retry(false)
    }

    /// OpenAI `type` for a status (behaviour-spec §18.1).
    fn openai_type(&self) -> &'static str {
        match self.status {
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            408 => "timeout_error",
            429 => "rate_limit_error",
            499 => "client_disconnected",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        }
    }

    /// Anthropic `error.type` for a status.
    fn anthropic_type(&self) -> &'static str {
        match self.status {
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            404 => "not_found_error",
            408 | 504 => "timeout_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        }
    }

    /// The JSON body in the client's dialect.
    pub fn body(&self, dialect: Dialect, request_id: &str) -> Vec<u8> {
        let v = match dialect {
            Dialect::OpenAi | Dialect::Gemini => {
                let mut err =
                    json!({"message": self.message, "type": self.openai_type(), "code": self.code});
                merge(&mut err, &self.extra);
                json!({"error": err, "request_id": request_id})
            }
            Dialect::Anthropic => {
                let mut err = json!({"type": self.anthropic_type(), "message": self.message, "code": self.code});
                merge(&mut err, &self.extra);
                json!({"type": "error", "error": err, "request_id": request_id})
            }
        };
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// The SSE event that ends a stream after commit, as the client's API ends a failed
    /// stream: Anthropic's `error` event, the Responses API's `response.failed` (its SDKs and
    /// Codex read the failure from there; a Chat-shaped `data: {"error":…}` they cannot parse),
    /// or Chat Completions' `data: {"error":…}`.
    pub fn sse_event(&self, endpoint: Endpoint, request_id: &str) -> Vec<u8> {
        let (name, body) = match endpoint {
            Endpoint::Responses => ("response.failed", self.failed_response(request_id)),
            e if e.dialect() == Dialect::Anthropic => {
                ("error", self.body(Dialect::Anthropic, request_id))
            }
            _ => ("", self.body(Dialect::OpenAi, request_id)),
        };
        let mut out = Vec::with_capacity(body.len() + 40);
        if !name.is_empty() {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(name.as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&body);
        out.extend_from_slice(b"\n\n");
        out
    }

    /// A Responses API `response.failed` event's data: the response, failed, with the error.
    fn failed_response(&self, request_id: &str) -> Vec<u8> {
        let mut err = json!({"code": self.code, "message": self.message});
        merge(&mut err, &self.extra);
        let v = json!({
            "type": "response.failed",
            "response": {
                "id": format!("resp_{request_id}"),
                "object": "response",
                "status": "failed",
                "error": err,
                "incomplete_details": null,
                "output": [],
            },
            "request_id": request_id,
        });
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// Headers that go with the body.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = Vec::new();
        // A client told not to retry is not told when to: the two never contradict.
        let retry = self.should_retry != Some(false);
        if let Some(s) = self.retry_after.filter(|_| retry).or(self.reset_after) {
            h.push(("retry-after", s.to_string()));
        }
        if let Some(r) = self.should_retry {
            h.push(("x-should-retry", r.to_string()));
        }
        h.extend(
            self.extra_headers
                .iter()
                .filter(|(n, _)| retry || !n.starts_with("retry-after"))
                .cloned(),
        );
        h
    }
}

fn merge(target: &mut serde_json::Value, extra: &Option<Box<serde_json::Value>>) {
    if let (Some(obj), Some(serde_json::Value::Object(add))) =
        (target.as_object_mut(), extra.as_deref())
    {
        for (k, v) in add {
            obj.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_envelope() {
        let e = ApiError::new(404, "model_not_found", "no route for `x`");
        let v: serde_json::Value = serde_json::from_slice(&e.body(Dialect::OpenAi, "r1")).unwrap();
        assert_eq!(v["error"]["code"], "model_not_found");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["message"], "no route for `x`");
        assert_eq!(v["request_id"], "r1");
    }

    #[test]
    fn anthropic_envelope() {
        let e = ApiError::new(429, "rate_limited", "slow down").retry_after(0);
        let v: serde_json::Value =
            serde_json::from_slice(&e.body(Dialect::Anthropic, "r2")).unwrap();
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert_eq!(v["error"]["code"], "rate_limited");
        assert_eq!(e.headers(), vec![("retry-after", "1".to_string())]);
    }

    #[test]
    fn sse_error_events() {
        let e = ApiError::new(502, "upstream_stream_failed", "cut");
        let a = String::from_utf8(e.sse_event(Endpoint::Messages, "r")).unwrap();
        assert!(a.starts_with("event: error\ndata: {") && a.ends_with("\n\n"));
        let o = String::from_utf8(e.sse_event(Endpoint::ChatCompletions, "r")).unwrap();
        assert!(o.starts_with("data: {\"error\""));
        let r = String::from_utf8(e.sse_event(Endpoint::Responses, "r")).unwrap();
        let data = r
            .strip_prefix("event: response.failed\ndata: ")
            .and_then(|d| d.strip_suffix("\n\n"))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["type"], "response.failed");
        assert_eq!(v["response"]["status"], "failed");
        assert_eq!(v["response"]["error"]["code"], "upstream_stream_failed");
    }
}
