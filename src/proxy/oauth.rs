//! The request path's side of OAuth connections that stay signed in (tokens:
//! `upstream::tokens`). Before a send: the access token this core holds for the connection,
//! refreshed first when it is within minutes of its expiry. After a 401: one refresh (or the
//! one another request is making), then the same account again with the new token; a refresh
//! token refused for good expires the connection, with the reason.

use super::exchange::{AttemptEnd, Ctx};
use crate::config::{Connection, OAuthRefresh};
use crate::ids::ConnNames;
use crate::resilience::classify::Reason;
use crate::state::core::Core;
use crate::timer;
use crate::upstream::call::{Call, call, end_within};
use crate::upstream::tokens::{Fresh, Refresh, TokenCell, Turn};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The token endpoint's time limit.
const REFRESH_TIMEOUT_MS: u64 = 10_000;
/// An access token without a stated lifetime is taken to last this long.
const DEFAULT_LIFETIME_S: u64 = 3_600;

/// How a refresh (this request's or another's) ended for this request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Refreshed {
    /// A token newer than the one used (or still fresh).
    Fresh,
    /// The refresh token is refused for good: why.
    Dead(String),
    /// Not refreshed this time.
    Failed,
}

/// The access token for a send on `conn` (`None`: the environment's, `conn.secret`), noting
/// its version for the answer.
#[inline(always)]
pub(super) fn token(ctx: &mut Ctx<'_, '_>, conn: &Connection) -> Option<Arc<str>> {
    conn.oauth.as_ref()?;
    refreshed_token(ctx, conn)
}

/// [`token`] for an OAuth connection (out of line: most connections hold a plain key).
#[inline(never)]
fn refreshed_token(ctx: &mut Ctx<'_, '_>, conn: &Connection) -> Option<Arc<str>> {
    let cell = ctx.core.shared.tokens.get(conn.index)?;
    let version = cell.version();
    let (used, token) = {
        let mut cache = ctx.core.tokens.borrow_mut();
        if cache.len() <= conn.index.index() {
            cache.resize(conn.index.index() + 1, (u64::MAX, None));
        }
        let slot = &mut cache[conn.index];
        if slot.0 != version {
            *slot = cell.current();
        }
        slot.clone()
    };
    ctx.lane.get_or_insert_with(Default::default).token_version = used;
    token
}

/// Refresh the access token of `conn` if it is due (`used: None`) or if the send that used
/// version `used` was refused; wait for another request's refresh if one is in flight. Never
/// past `deadline`.
pub(super) async fn refresh(
    core: &Core,
    label: &str,
    conn: &Connection,
    used: Option<u64>,
    deadline: Instant,
) -> Refreshed {
    let (Some(oauth), Some(cell)) = (&conn.oauth, core.shared.tokens.get(conn.index)) else {
        return Refreshed::Failed;
    };
    match cell.begin(crate::clock::unix_ms(), used) {
        Turn::Fresh => Refreshed::Fresh,
        Turn::Later => Refreshed::Failed,
        Turn::Dead(why) => Refreshed::Dead(why),
        Turn::Follow => follow(cell, used, deadline).await,
        Turn::Lead(refresh_token) => {
            let mut lead = Lead { cell, done: false };
            let body = serde_json::json!({
                "grant_type": "refresh_token",
                "refresh_token": refresh_token.expose(),
                "client_id": oauth.client_id,
            })
            .to_string();
            let reply = ask(core, oauth, body.as_bytes(), deadline).await;
            let outcome = judge(reply, refresh_token.expose());
            lead.done = true;
            let result = match &outcome {
                Ok(_) => Refreshed::Fresh,
                Err((Refresh::Rejected, why)) => Refreshed::Dead(why.clone()),
                Err(_) => Refreshed::Failed,
            };
            if let Some(record) = cell.finish(outcome, crate::clock::unix_ms()) {
                core.shared
                    .tokens
                    .keep(label, cell, &record, core.shared.store);
            }
            result
        }
    }
}

/// Ends the refresh if the leading request is dropped during its call.
struct Lead<'a> {
    cell: &'a TokenCell,
    done: bool,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if !self.done {
            let abandoned = Err((Refresh::Failed, "abandoned".to_string()));
            self.cell.finish(abandoned, crate::clock::unix_ms());
        }
    }
}

/// Wait for another request's refresh (polled: once an hour per connection at most).
async fn follow(cell: &TokenCell, used: Option<u64>, deadline: Instant) -> Refreshed {
    let end = end_within(deadline, REFRESH_TIMEOUT_MS + 1_000);
    let settled = || match cell.settled() {
        (_, Some(why)) => Some(Refreshed::Dead(why)),
        (false, None) if used.is_none_or(|v| cell.version() != v) => Some(Refreshed::Fresh),
        (false, None) => Some(Refreshed::Failed),
        (true, None) => None,
    };
    timer::poll_until(end, Duration::from_millis(20), settled)
        .await
        .unwrap_or(Refreshed::Failed)
}

/// The token endpoint's answer to a refresh.
async fn ask(
    core: &Core,
    oauth: &OAuthRefresh,
    body: &[u8],
    deadline: Instant,
) -> Option<(u16, serde_json::Value)> {
    let c = Call {
        endpoint: &oauth.token_url,
        method: "POST",
        path: &oauth.token_url.base_path,
        headers: b"",
        body,
        provider: None,
    };
    call(
        &core.connector,
        &c,
        end_within(deadline, REFRESH_TIMEOUT_MS),
    )
    .await
}

/// New tokens, or how the refresh failed: a 400, 401 or 403 refuses the refresh token for
/// good (OAuth's `invalid_grant`); anything else may pass.
fn judge(reply: Option<(u16, serde_json::Value)>, sent: &str) -> Result<Fresh, (Refresh, String)> {
    let Some((status, v)) = reply else {
        return Err((
            Refresh::Failed,
            "the token endpoint did not answer in time".into(),
        ));
    };
    if matches!(status, 400 | 401 | 403) {
        let why = v["error"].as_str().unwrap_or("refused");
        // The endpoint's own words are kept short and never carry a token back: the refresh
        // token it was sent is redacted before the words are cut.
        let secrets = super::redact::Secrets {
            key: sent.as_bytes(),
            token: None,
        };
        let why: String = secrets
            .redact_str(why)
            .chars()
            .filter(char::is_ascii_graphic)
            .take(64)
            .collect();
        return Err((
            Refresh::Rejected,
            format!("the token endpoint refused the refresh token ({status} {why})"),
        ));
    }
    if !(200..300).contains(&status) {
        return Err((
            Refresh::Failed,
            format!("the token endpoint answered {status}"),
        ));
    }
    let access = v["access_token"].as_str().filter(|t| valid_token(t));
    let Some(access) = access else {
        return Err((
            Refresh::Failed,
            "no usable access_token in the answer".into(),
        ));
    };
    let lifetime = v["expires_in"].as_u64().unwrap_or(DEFAULT_LIFETIME_S);
    Ok(Fresh {
        access: access.to_string(),
        refresh: v["refresh_token"]
            .as_str()
            .filter(|t| valid_token(t))
            .map(str::to_string),
        expires_at_ms: crate::clock::unix_ms() + lifetime.min(365 * 86_400) * 1_000,
    })
}

/// A token goes into a header: visible ASCII only, of a sane length.
fn valid_token(t: &str) -> bool {
    !t.is_empty() && t.len() <= 4_096 && t.bytes().all(|b| b.is_ascii_graphic())
}

/// `provider/connection` of a connection (the store key of its sealed tokens).
fn label<'a>(ctx: &Ctx<'_, 'a>, conn: &Connection) -> &'a str {
    let names: &'a [ConnNames] = &ctx.generation.conn_names;
    names.get(conn.index.index()).map_or("", |n| n.label)
}

/// Refresh, ahead of their expiry, the access tokens this generation's OAuth connections
/// hold (the first core's tick, once a second): requests never wait for it. A token that
/// expires anyway is refreshed after its 401 (`after_refusal`).
pub fn refresh_due(core: &std::rc::Rc<Core>) {
    let generation = core.generation();
    let now = crate::clock::unix_ms();
    for p in &generation.config.providers {
        for c in p.connections.iter().filter(|c| c.oauth.is_some()) {
            let Some(cell) = core.shared.tokens.get(c.index) else {
                continue;
            };
            if !cell.due(now) || cell.settled() != (false, None) {
                continue;
            }
            let (core, generation, index) = (core.clone(), generation.clone(), c.index);
            monoio::spawn(async move {
                let Some((_, conn)) = generation.config.connection(index) else {
                    return;
                };
                let label = generation
                    .conn_names
                    .get(index.index())
                    .map_or("", |n| n.label);
                let deadline = crate::clock::instant() + Duration::from_millis(REFRESH_TIMEOUT_MS);
                refresh(&core, label, conn, None, deadline).await;
            });
        }
    }
}

/// After a 401 on an OAuth connection: refresh its token once for this request (or take the
/// one another request just got) and send to the same account again; a refresh token refused
/// for good is noted, for [`expire_if_refused`].
pub(super) async fn after_refusal(ctx: &mut Ctx<'_, '_>, conn: &Connection, deadline: Instant) {
    let Some(lane) = ctx.lane.as_mut() else {
        return;
    };
    if std::mem::replace(&mut lane.token_refreshed, true) {
        return;
    }
    let used = Some(lane.token_version);
    match refresh(ctx.core, label(ctx, conn), conn, used, deadline).await {
        Refreshed::Fresh => super::usage_wall::token_refreshed(ctx),
        Refreshed::Dead(why) => {
            if let Some(lane) = ctx.lane.as_mut() {
                lane.token_dead = Some(why);
            }
        }
        Refreshed::Failed => {}
    }
}

/// A 401 whose refresh token was refused for good expires the connection, with the reason.
pub(super) fn expire_if_refused(ctx: &mut Ctx<'_, '_>, mut end: AttemptEnd) -> AttemptEnd {
    let dead = ctx.lane.as_mut().and_then(|l| l.token_dead.take());
    if let (Some(why), AttemptEnd::Failed(f)) = (dead, &mut end) {
        f.verdict.reason = Reason::TokenRefreshFailed;
        f.verdict.lasting = true;
        f.detail = format!("{}; {why}", f.detail);
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SENT: &str = "sk-ant-ort01-the-refresh-token";

    #[test]
    fn the_token_endpoints_answers_are_judged() {
        let ok = judge(
            Some((
                200,
                json!({"access_token": "at-1", "refresh_token": "rt-2", "expires_in": 60}),
            )),
            SENT,
        );
        let Ok(fresh) = ok else {
            panic!("a fresh token expected")
        };
        assert_eq!(
            (fresh.access.as_str(), fresh.refresh.as_deref()),
            ("at-1", Some("rt-2"))
        );
        assert!(fresh.expires_at_ms > crate::clock::unix_ms() + 59_000);
        let gone = judge(Some((400, json!({"error": "invalid_grant"}))), SENT);
        assert!(matches!(gone, Err((Refresh::Rejected, ref w)) if w.contains("invalid_grant")));
        assert!(matches!(
            judge(Some((503, json!({}))), SENT),
            Err((Refresh::Failed, _))
        ));
        assert!(matches!(judge(None, SENT), Err((Refresh::Failed, _))));
        // A token with a line break never reaches a header.
        let bad = judge(
            Some((200, json!({"access_token": "at\r\nx-evil: 1"}))),
            SENT,
        );
        assert!(matches!(bad, Err((Refresh::Failed, _))));
        // Words that quote the refresh token it was sent keep none of it.
        let quoted = judge(
            Some((400, json!({"error": format!("unknown {SENT}")}))),
            SENT,
        );
        assert!(
            matches!(quoted, Err((Refresh::Rejected, ref w)) if w.contains("[REDACTED]") && !w.contains("ort01"))
        );
    }
}
