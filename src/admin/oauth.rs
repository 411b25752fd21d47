//! An OAuth connection's tokens as the admin API shows them (`GET /admin/connections`): when
//! the access token expires and how its refreshes went; never a token.

use crate::config::Connection;
use crate::upstream::tokens::TokenCell;
use serde_json::{Value, json};

/// The tokens of `conn`, or `None` when it has no refresh token.
pub fn view(cell: Option<&TokenCell>, conn: Option<&Connection>) -> Option<Value> {
    conn?.oauth.as_ref()?;
    let v = cell?.view();
    let now = crate::clock::unix_ms();
    Some(json!({
        "expires_at_ms": v.expires_at_ms,
        "expires_in_s": v.expires_at_ms.map(|t| t.saturating_sub(now) / 1_000),
        "refreshing": v.refreshing,
        "refreshes": v.refreshes,
        "failures": v.failures,
        "last_refresh": v.last.map(|(o, at)| json!({"outcome": o, "at_ms": at})),
        "refused": v.dead,
    }))
}
