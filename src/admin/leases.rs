//! `GET /admin/leases` (every lease the store knows, live ones first, never an owner value or a
//! credential) and `DELETE /admin/leases/{owner_sha256}` (revoke: the connection is free at
//! once and the owner's next request is refused before dispatch).

use crate::state::core::Shared;
use crate::store::leases::{Op, Outcome, State};
use serde_json::{Value, json};

pub async fn handle(shared: &Shared, method: &str, path: &str) -> Option<(u16, Value)> {
    let rest = path.strip_prefix("/admin/leases")?;
    match (method, rest) {
        ("GET", "" | "/") => Some(list(shared)),
        ("DELETE", r) if r.len() > 1 => {
            let owner = r.strip_prefix('/').unwrap_or(r);
            if owner.len() != 64 || !owner.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Some((
                    400,
                    json!({"error": {"message": "write the lease's owner_sha256 (64 hex digits)", "type": "invalid_request_error", "code": "invalid_lease_id"}}),
                ));
            }
            let op = Op::Revoke {
                owner: owner.to_ascii_lowercase(),
                reason: "AUTHORIZATION_CHANGED".into(),
            };
            let rx = shared.store.lease(op);
            let outcome = monoio::time::timeout(std::time::Duration::from_secs(5), rx).await;
            Some(match outcome {
                Ok(Ok(Outcome::Revoked(n))) if n > 0 => (200, json!({"revoked": owner})),
                Ok(Ok(Outcome::Revoked(_))) => (
                    404,
                    json!({"error": {"message": "no live lease with that owner", "type": "invalid_request_error", "code": "not_found"}}),
                ),
                _ => (
                    503,
                    json!({"error": {"message": "the lease store did not answer", "type": "server_error", "code": "store_unavailable"}}),
                ),
            })
        }
        _ => None,
    }
}

fn list(shared: &Shared) -> (u16, Value) {
    let now = crate::clock::unix_ms();
    let Ok(mut rows) = shared.store.lease_rows() else {
        return (
            503,
            json!({"error": {"message": "the lease store did not answer; try again", "type": "server_error", "code": "LEASE_SERVICE_UNAVAILABLE"}}),
        );
    };
    rows.sort_by_key(|l| {
        (
            l.state_at(now) != State::Active,
            std::cmp::Reverse(l.renewed_at),
        )
    });
    let leases: Vec<Value> = rows
        .iter()
        .map(|l| {
            json!({
                "owner_sha256": l.owner,
                "client": l.client,
                "connection": l.connection,
                "generation": l.generation,
                "state": l.state_at(now),
                "acquired_at_ms": l.acquired_at,
                "renewed_at_ms": l.renewed_at,
                "expires_at_ms": l.expires_at,
                "expires_in_ms": l.expires_at.saturating_sub(now),
                "ended_at_ms": l.ended_at,
                "end_reason": l.end_reason,
            })
        })
        .collect();
    let active = rows.iter().filter(|l| l.live(now)).count();
    (200, json!({"active": active, "leases": leases}))
}
