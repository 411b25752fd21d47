//! The decision record of one request: every attempt and how it ended. It becomes the access
//! log line, the `x-ringside-attempts` header and (later) the admin ring of recent decisions.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct AttemptRecord {
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub ms: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct Record {
    pub request_id: String,
    pub core: usize,
    pub method: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    pub status: u16,
    pub stream: bool,
    pub attempts: Vec<AttemptRecord>,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<u64>,
    pub total_ms: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Record {
    pub fn log_line(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("ts_ms".into(), crate::clock::unix_ms().into());
            o.insert("kind".into(), "access".into());
        }
        v.to_string()
    }
}
