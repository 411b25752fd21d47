//! The `[telemetry]` section of the config file.

use serde::Deserialize;

/// `[telemetry]`: OpenTelemetry export (off unless `otlp_endpoint` is set).
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySection {
    /// The collector's OTLP/HTTP endpoint: `http://host:4318` (`/v1/traces` is added unless
    /// the URL has a path of its own), or `https://`.
    pub otlp_endpoint: String,
    /// The spans' `service.name` (default `ringside`).
    pub service_name: Option<String>,
    /// The variable holding headers for the collector (`name=value,...`, credentials).
    pub otlp_headers_env: Option<String>,
}
