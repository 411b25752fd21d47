//! Client headers a provider gets only when its `forward_headers` names them: they would bill
//! or authenticate as someone else, or they map the operator's network.

/// Whether `name` is forwarded only to a provider that asks for it.
pub(super) fn unless_asked(name: &str) -> bool {
    is_billing_or_credential(name) || is_client_address(name)
}

/// Client headers that carry a credential or a billing scope: forwarded only to providers
/// whose `forward_headers` names them (they would bill, or authenticate as, someone else).
fn is_billing_or_credential(name: &str) -> bool {
    let candidates: &[&str] = match name.len() {
        14 => &["openai-project", "x-goog-api-key"],
        19 => &["openai-organization"],
        25 => &["ocp-apim-subscription-key"],
        _ => return false,
    };
    candidates.iter().any(|d| d.eq_ignore_ascii_case(name))
}

/// Client headers that tell where the client is (addresses and names inside the operator's
/// network): forwarded only to providers whose `forward_headers` names them. A provider has
/// no use for them, and they map the operator's network for whoever reads its logs.
fn is_client_address(name: &str) -> bool {
    let candidates: &[&str] = match name.len() {
        9 => &["forwarded", "x-real-ip"],
        11 => &["x-client-ip"],
        14 => &["true-client-ip"],
        15 => &["x-forwarded-for"],
        16 => &["x-forwarded-host", "x-forwarded-port", "cf-connecting-ip"],
        17 => &["x-forwarded-proto"],
        _ => return false,
    };
    candidates.iter().any(|d| d.eq_ignore_ascii_case(name))
}
