//! OpenTelemetry: each request as a span, and each of its upstream attempts as a child span,
//! exported over OTLP/HTTP (protobuf) to a collector, with the GenAI semantic conventions'
//! attributes (`gen_ai.operation.name`, `gen_ai.system`, `gen_ai.request.model`,
//! `gen_ai.usage.input_tokens`...). Off by default (`[telemetry] otlp_endpoint`).
//!
//! The spans come from the decision record each request already keeps: a core copies what a
//! span needs into a `RequestSpan` when the request ends and hands it over a bounded channel
//! (never waiting: a full channel drops the span and counts it). The export runs on a thread of
//! its own (`export`), never on a core, batching up to a second of spans per call. The trace
//! is the one Ringside already takes part in (the client's `traceparent`, or one it began):
//! the request's span is a child of the client's span, and each attempt's span has the id
//! that went upstream as its `traceparent` parent.

mod export;
mod http;
mod span;

pub use export::start;
pub use span::{AttemptSpan, RequestSpan};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Whether this process exports spans (set once, at start: `[telemetry]` needs a restart).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported: a committed stream keeps its client's `traceparent` for its
/// span only then.
pub fn exporting() -> bool {
    EXPORTING.load(Relaxed)
}

/// Spans waiting for the exporter at most (a request's is a few hundred bytes).
const QUEUE: usize = 16_384;

/// Where spans go, as the config says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The collector's OTLP/HTTP traces URL (`http://host:4318/v1/traces`).
    pub endpoint: String,
    /// `service.name` of the spans' resource.
    pub service_name: String,
    /// Headers sent with every export (a collector's credentials: never logged).
    pub headers: Vec<(String, String)>,
}

/// The cores' side: a channel to the exporter thread.
pub struct Sink {
    tx: crossbeam_channel::Sender<RequestSpan>,
    /// Spans dropped because the exporter was behind.
    pub dropped: AtomicU64,
    /// Spans exported, and exports that failed (the collector away, refusing).
    pub exported: std::sync::Arc<AtomicU64>,
    pub failed_exports: std::sync::Arc<AtomicU64>,
}

impl Sink {
    /// Hand a finished request's span over; never waits.
    pub fn send(&self, span: RequestSpan) {
        if self.tx.try_send(span).is_err() {
            self.dropped.fetch_add(1, Relaxed);
        }
    }

    /// `ringside_otlp_*` metric lines.
    pub fn metrics(&self) -> String {
        format!(
            "# HELP ringside_otlp_spans_exported_total Request spans sent to the OTLP collector (each with its attempts).\n# TYPE ringside_otlp_spans_exported_total counter\nringside_otlp_spans_exported_total {}\n\
             # HELP ringside_otlp_spans_dropped_total Request spans dropped because the exporter was behind.\n# TYPE ringside_otlp_spans_dropped_total counter\nringside_otlp_spans_dropped_total {}\n\
             # HELP ringside_otlp_export_failures_total OTLP exports that failed (the collector away or refusing).\n# TYPE ringside_otlp_export_failures_total counter\nringside_otlp_export_failures_total {}\n",
            self.exported.load(Relaxed),
            self.dropped.load(Relaxed),
            self.failed_exports.load(Relaxed),
        )
    }
}

/// Parse `OTLP headers` as `name=value,name2=value2` (the `OTEL_EXPORTER_OTLP_HEADERS` form).
pub fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or("expected name=value pairs separated by commas")?;
        let (k, v) = (k.trim(), v.trim());
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if k.is_empty() || !k.chars().all(token) {
            return Err(format!("`{k}` is not a header name"));
        }
        if v.chars().any(|c| c.is_control()) {
            return Err(format!("the value of `{k}` holds a control character"));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn headers_parse_as_otel_says() {
        let h = super::parse_headers("authorization=Bearer x, x-team = red").expect("parse");
        assert_eq!(h[0], ("authorization".into(), "Bearer x".into()));
        assert_eq!(h[1], ("x-team".into(), "red".into()));
        assert!(super::parse_headers("no-equals").is_err());
        assert!(super::parse_headers("a b=c").is_err());
        assert!(super::parse_headers("a=b\nc").is_err());
    }
}
