//! The exporter thread: spans from the cores, batched (up to `BATCH` requests, or a second),
//! sent to the collector with the OTLP exporter of the `opentelemetry-otlp` crate.

use super::{RequestSpan, Settings, Sink};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanExporter;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Requests per export at most.
const BATCH: usize = 512;
/// The longest a span waits for its batch.
const LINGER: Duration = Duration::from_secs(1);

/// Start the exporter thread; the cores' sink.
pub fn start(settings: &Settings) -> Result<Sink, String> {
    let headers = settings.headers.iter().cloned().collect();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(super::http::Client::new())
        .with_endpoint(settings.endpoint.clone())
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_timeout(Duration::from_secs(10))
        .with_headers(headers)
        .build()
        .map_err(|e| format!("telemetry: the OTLP exporter: {e}"))?;
    let resource = Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", settings.service_name.clone()),
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        ])
        .build();
    exporter.set_resource(&resource);
    let (tx, rx) = crossbeam_channel::bounded(super::QUEUE);
    let exported = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let (e, f) = (exported.clone(), failed.clone());
    std::thread::Builder::new()
        .name("ringside-otlp".into())
        .spawn(move || run(&exporter, &rx, &e, &f))
        .map_err(|e| format!("telemetry: cannot start its thread: {e}"))?;
    super::EXPORTING.store(true, Relaxed);
    Ok(Sink {
        tx,
        dropped: AtomicU64::new(0),
        exported,
        failed_exports: failed,
    })
}

fn run(
    exporter: &opentelemetry_otlp::SpanExporter,
    rx: &crossbeam_channel::Receiver<RequestSpan>,
    exported: &AtomicU64,
    failed: &AtomicU64,
) {
    let scope = InstrumentationScope::builder("ringside")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let mut batch: Vec<RequestSpan> = Vec::with_capacity(BATCH);
    loop {
        let deadline = Instant::now() + LINGER;
        // The first span of a batch is waited for as long as it takes; the rest up to LINGER.
        match rx.recv() {
            Ok(s) => batch.push(s),
            Err(_) => return,
        }
        while batch.len() < BATCH {
            match rx.recv_deadline(deadline) {
                Ok(s) => batch.push(s),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        let spans = batch
            .drain(..)
            .flat_map(|s| s.to_span_data(&scope))
            .collect();
        match futures_executor::block_on(exporter.export(spans)) {
            Ok(()) => exported.fetch_add(n, Relaxed),
            Err(e) => {
                // Paced by the batching: at most one line a second while the collector is away.
                crate::log::event(
                    "warn",
                    "telemetry: an OTLP export failed",
                    serde_json::json!({"spans": n, "error": e.to_string()}),
                );
                failed.fetch_add(1, Relaxed)
            }
        };
    }
}
