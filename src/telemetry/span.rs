//! What a request's spans say, copied from its decision record when it ends, and turned into
//! OpenTelemetry span data on the exporter thread.

use crate::audit::{AttemptOutcome, Record};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::SpanData;
use std::time::{Duration, SystemTime};

/// One request, as its span will say.
#[derive(Debug)]
pub struct RequestSpan {
    pub trace_id: [u8; 16],
    pub sampled: bool,
    /// The client's span (its `traceparent`), or none.
    pub parent: Option<[u8; 8]>,
    pub span_id: [u8; 8],
    pub start: SystemTime,
    pub end: SystemTime,
    /// `chat`, `embeddings`, `text_completion`.
    pub operation: &'static str,
    pub request_model: Option<String>,
    pub route: Option<String>,
    pub request_id: String,
    pub method: String,
    pub path: String,
    pub status: u16,
    pub outcome: &'static str,
    pub error_code: Option<&'static str>,
    pub stream: bool,
    pub input_tokens: Option<u32>,
    pub output_tokens: Option<u32>,
    pub cached_tokens: Option<u32>,
    pub ttft: Option<Duration>,
    pub client_key: Option<String>,
    pub attempts: Vec<AttemptSpan>,
}

/// One upstream attempt.
#[derive(Debug)]
pub struct AttemptSpan {
    pub span_id: [u8; 8],
    pub start: SystemTime,
    pub end: SystemTime,
    /// `gen_ai.system`: `openai`, `anthropic`, `gcp.gemini`, `azure.ai.openai`.
    pub system: &'static str,
    pub provider: &'static str,
    pub connection: &'static str,
    pub model: String,
    pub outcome: AttemptOutcome,
    pub status: Option<u16>,
    pub decision: &'static str,
}

/// The span id of the request's own span: derived like its attempts' (`Trace::span`), from a
/// number no attempt takes.
const REQUEST_SPAN: usize = 0xFFFF_FFFF;

impl RequestSpan {
    /// Copy what the spans need from a finished request's record. `system_of` names the
    /// GenAI system of a provider id; `parent` is the client's span, if it sent one.
    pub fn of(
        r: &Record,
        parent: Option<[u8; 8]>,
        system_of: &dyn Fn(&str) -> &'static str,
    ) -> RequestSpan {
        let end = SystemTime::now();
        let start = end - Duration::from_micros(r.total_us);
        let at = |us: u64| start + Duration::from_micros(us);
        let attempts = (r.attempts.iter().enumerate())
            .map(|(n, a)| AttemptSpan {
                span_id: r.trace.span(n),
                start: at(a.ended_us.saturating_sub(a.ms * 1000)),
                end: at(a.ended_us),
                system: system_of(a.provider),
                provider: a.provider,
                connection: a.connection,
                model: a.model.to_string(),
                outcome: a.outcome,
                status: a.status,
                decision: a.decision.as_str(),
            })
            .collect();
        let path = r.path.to_string();
        RequestSpan {
            trace_id: r.trace.id,
            sampled: r.trace.flags & 1 == 1,
            parent,
            span_id: r.trace.span(REQUEST_SPAN),
            start,
            end,
            operation: operation(&path),
            request_model: r.model.clone(),
            route: r.route.as_ref().map(|n| n.to_string()),
            request_id: r.request_id.clone(),
            method: r.method.to_string(),
            path,
            status: r.status,
            outcome: r.outcome.as_str(),
            error_code: r.error_code,
            stream: r.stream,
            input_tokens: r.tokens.prompt,
            output_tokens: r.tokens.completion,
            cached_tokens: r.tokens.cached,
            ttft: (r.ttft_us > 0).then(|| Duration::from_micros(u64::from(r.ttft_us))),
            client_key: r.client.clone(),
            attempts,
        }
    }

    /// The request's span and its attempts', as the SDK exports them.
    pub fn to_span_data(&self, scope: &InstrumentationScope) -> Vec<SpanData> {
        let mut out = Vec::with_capacity(1 + self.attempts.len());
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", self.operation),
            KeyValue::new("http.request.method", self.method.clone()),
            KeyValue::new("url.path", self.path.clone()),
            KeyValue::new("http.response.status_code", i64::from(self.status)),
            KeyValue::new("ringside.request_id", self.request_id.clone()),
            KeyValue::new("ringside.outcome", self.outcome),
            KeyValue::new("ringside.stream", self.stream),
            KeyValue::new("ringside.attempts", self.attempts.len() as i64),
        ];
        let opt = |attrs: &mut Vec<KeyValue>, k: &'static str, v: Option<String>| {
            if let Some(v) = v {
                attrs.push(KeyValue::new(k, v));
            }
        };
        opt(
            &mut attrs,
            "gen_ai.request.model",
            self.request_model.clone(),
        );
        opt(&mut attrs, "ringside.route", self.route.clone());
        opt(&mut attrs, "ringside.client_key", self.client_key.clone());
        // The answer's model and system: the attempt that was delivered (the last one).
        if let Some(last) = self.attempts.last() {
            attrs.push(KeyValue::new("gen_ai.system", last.system));
            attrs.push(KeyValue::new("gen_ai.provider.name", last.system));
            attrs.push(KeyValue::new("gen_ai.response.model", last.model.clone()));
        }
        tokens(&mut attrs, self);
        if let Some(t) = self.ttft {
            attrs.push(KeyValue::new(
                "ringside.time_to_first_token_s",
                t.as_secs_f64(),
            ));
        }
        let ok = self.outcome == "ok";
        if !ok {
            let what = self.error_code.unwrap_or(self.outcome);
            attrs.push(KeyValue::new("error.type", what));
        }
        let name = format!(
            "{} {}",
            self.operation,
            self.request_model.as_deref().unwrap_or("")
        );
        let parent = self.parent.map_or(SpanId::INVALID, SpanId::from_bytes);
        out.push(self.data(
            scope,
            (self.span_id, parent, self.parent.is_some()),
            name,
            SpanKind::Server,
            (self.start, self.end),
            attrs,
            ok,
        ));
        for a in &self.attempts {
            out.push(self.attempt_data(scope, a));
        }
        out
    }

    fn attempt_data(&self, scope: &InstrumentationScope, a: &AttemptSpan) -> SpanData {
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", self.operation),
            KeyValue::new("gen_ai.system", a.system),
            KeyValue::new("gen_ai.provider.name", a.system),
            KeyValue::new("gen_ai.request.model", a.model.clone()),
            KeyValue::new("ringside.provider", a.provider),
            KeyValue::new("ringside.connection", a.connection),
            KeyValue::new("ringside.attempt.outcome", a.outcome.as_str()),
            KeyValue::new("ringside.decision", a.decision),
        ];
        if let Some(s) = a.status {
            attrs.push(KeyValue::new("http.response.status_code", i64::from(s)));
        }
        let ok = a.outcome == AttemptOutcome::Ok;
        if !ok {
            attrs.push(KeyValue::new("error.type", a.outcome.as_str()));
        }
        let name = format!("{} {}", self.operation, a.model);
        let ids = (a.span_id, SpanId::from_bytes(self.span_id), false);
        self.data(
            scope,
            ids,
            name,
            SpanKind::Client,
            (a.start, a.end),
            attrs,
            ok,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn data(
        &self,
        scope: &InstrumentationScope,
        (span, parent, remote): ([u8; 8], SpanId, bool),
        name: String,
        kind: SpanKind,
        (start, end): (SystemTime, SystemTime),
        attributes: Vec<KeyValue>,
        ok: bool,
    ) -> SpanData {
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let ctx = SpanContext::new(
            TraceId::from_bytes(self.trace_id),
            SpanId::from_bytes(span),
            flags,
            false,
            TraceState::default(),
        );
        SpanData {
            span_context: ctx,
            parent_span_id: parent,
            parent_span_is_remote: remote,
            span_kind: kind,
            name: name.into(),
            start_time: start,
            end_time: end.max(start),
            attributes,
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: if ok { Status::Ok } else { Status::error("") },
            instrumentation_scope: scope.clone(),
        }
    }
}

/// `gen_ai.usage.*` as the upstream reported them.
fn tokens(attrs: &mut Vec<KeyValue>, s: &RequestSpan) {
    let pairs = [
        ("gen_ai.usage.input_tokens", s.input_tokens),
        ("gen_ai.usage.output_tokens", s.output_tokens),
        ("gen_ai.usage.cache_read.input_tokens", s.cached_tokens),
    ];
    for (k, v) in pairs {
        if let Some(v) = v {
            attrs.push(KeyValue::new(k, i64::from(v)));
        }
    }
}

/// `gen_ai.operation.name` of a data-plane path.
fn operation(path: &str) -> &'static str {
    if path.ends_with("/embeddings") {
        "embeddings"
    } else if path.ends_with("/completions") && !path.ends_with("/chat/completions") {
        "text_completion"
    } else {
        "chat"
    }
}
