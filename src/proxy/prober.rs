//! The prober: while a provider's breaker is open or one of its keys cools for the provider's
//! own trouble (`resilience::probe`), one cheap request at a time asks whether the provider is
//! back: the provider's model list (`GET …/models`, free at every provider) with one key, every
//! few hundred milliseconds (the breaker's `probe_interval_ms`, doubling while it flaps). An
//! answer half-opens the breaker and lifts the key's cooldown on every core, so Ringside serves
//! again within a probe's spacing of the provider's return instead of at a timer's end.
//!
//! It runs on core 0 only (one probe per provider in the whole process); what it learns goes
//! to the other cores as events, like any request's verdict. A model list answering while the
//! model itself still fails is caught by the half-open breaker's one real request.

use crate::config::{Connection, Provider};
use crate::ids::ConnId;
use crate::resilience::probe::ProbeAnswer;
use crate::state::core::Core;
use crate::state::generation::CoreGen;
use crate::upstream::call::{Call, status};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often the prober looks at the tables (a probe's spacing is the breaker's interval).
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// A probe that has not answered by then is no answer (the timers keep running).
const PROBE_TIMEOUT_MS: u64 = 2_000;

/// One provider's probing: when the next probe may go, whose turn it is, whether one is out.
#[derive(Default)]
struct Slot {
    next_at: u64,
    turn: usize,
    out: Rc<Cell<bool>>,
}

/// Probe until the process shuts down (core 0's task).
pub(crate) async fn run(core: Rc<Core>) {
    let mut slots: Vec<Slot> = Vec::new();
    loop {
        monoio::time::sleep(LOOK_EVERY).await;
        if core.shared.shutdown.load(Ordering::Relaxed) {
            return;
        }
        core.sync();
        let generation = core.generation();
        let now = crate::clock::now_ms();
        for provider in &generation.config.providers {
            if slots.len() <= provider.slot {
                slots.resize_with(provider.slot + 1, Slot::default);
            }
            let slot = &mut slots[provider.slot];
            if slot.out.get() || now < slot.next_at {
                continue;
            }
            let s = &generation.config.resilience;
            let need = core.tables.borrow_mut().probe_need(s, provider.slot, now);
            let Some(need) = need else {
                continue;
            };
            let conn = need.keys[slot.turn % need.keys.len()];
            slot.turn = slot.turn.wrapping_add(1);
            slot.next_at = now + need.every_ms;
            slot.out.set(true);
            let out = Out(slot.out.clone());
            monoio::spawn(probe(core.clone(), generation.clone(), conn, out));
        }
    }
}

/// Marks the provider's probe as answered when the probe ends, however it ends.
struct Out(Rc<Cell<bool>>);

impl Drop for Out {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// One probe with the key `conn`, its answer applied here and sent to the other cores.
async fn probe(core: Rc<Core>, generation: Rc<CoreGen>, conn: ConnId, _out: Out) {
    let Some((provider, connection)) = generation.config.connection(conn) else {
        return;
    };
    let path = models_path(provider);
    let headers = probe_headers(&core, provider, connection);
    let call = Call {
        endpoint: &provider.endpoint,
        method: "GET",
        path: &path,
        headers: &headers,
        body: &[],
        provider: Some(provider.slot),
    };
    let end = crate::clock::instant() + Duration::from_millis(PROBE_TIMEOUT_MS);
    let answer = status(&core.connector, &call, end)
        .await
        .map_or(ProbeAnswer::Down, ProbeAnswer::of_status);
    let changed = core.record_probe(provider.slot, conn, answer);
    if changed {
        crate::log::event(
            "info",
            "probe: provider answers again",
            serde_json::json!({"provider": provider.id, "connection": connection.id}),
        );
    }
}

/// The provider's model list: where each API keeps it (Azure's with its `api-version`).
fn models_path(provider: &Provider) -> String {
    let base = provider.endpoint.base_path.trim_end_matches('/');
    match provider.azure_api_version.as_deref() {
        Some("v1" | "preview") => format!("{base}/openai/v1/models"),
        Some(version) => format!("{base}/openai/models?api-version={version}"),
        None => format!("{base}/models"),
    }
}

/// The key's credential as the provider takes it (an OAuth account's current token), and the
/// beta an OAuth client must name.
fn probe_headers(core: &Core, provider: &Provider, connection: &Connection) -> Vec<u8> {
    let token = match connection.oauth {
        Some(_) => core
            .shared
            .tokens
            .get(connection.index)
            .and_then(|cell| cell.current().1),
        None => None,
    };
    let credential = token.as_deref().unwrap_or(connection.secret.expose());
    let mut h = Vec::with_capacity(256);
    super::outbound::push_credential(&mut h, provider, credential, false);
    if !provider.oauth_beta.is_empty() {
        h.extend_from_slice(b"anthropic-beta: ");
        h.extend_from_slice(provider.oauth_beta.as_bytes());
        h.extend_from_slice(b"\r\n");
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_keeps_its_model_list_where_its_reference_says() {
        let text = r#"
[[providers]]
id = "o"
dialect = "openai"
base_url = "https://api.openai.com/v1"
connections = [{ id = "a", key_env = "K" }]
[[providers]]
id = "az"
dialect = "azure"
api_version = "2024-10-21"
base_url = "https://r.openai.azure.com"
connections = [{ id = "a", key_env = "K" }]
[[providers]]
id = "g"
dialect = "gemini"
base_url = "https://generativelanguage.googleapis.com/v1beta"
connections = [{ id = "a", key_env = "K" }]
"#;
        let env = |n: &str| (n == "K").then(|| "k".to_string());
        let cfg = crate::config::load_str(text, "test", &env).expect("valid");
        let paths: Vec<String> = cfg.providers.iter().map(models_path).collect();
        assert_eq!(
            paths,
            [
                "/v1/models",
                "/openai/models?api-version=2024-10-21",
                "/v1beta/models"
            ]
        );
    }
}
