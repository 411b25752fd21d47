//! The admin port: health, readiness, Prometheus metrics, and the resilience state
//! (connections, model cooldowns, breakers, recent decisions). It runs on its own thread and
//! runtime so that scrapes never compete with the data-plane cores.

pub mod access;
mod audit;
mod config_view;
pub mod control;
mod endpoints;
pub mod flow;
mod history;
pub mod leases;
mod oauth;
mod page;
mod shortage;
mod spend;
pub mod state;
mod transitions;
mod usage_wall;

use crate::http::HeadLimits;
use crate::http::response::whole;
use crate::state::audit_trail::Actor;
use crate::state::core::Shared;
use monoio::net::{ListenerOpts, TcpListener, TcpStream};
use state::AdminState;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub fn start(
    shared: Arc<Shared>,
    inbox: crossbeam_channel::Receiver<crate::resilience::Event>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let addr = shared.current().config.server.admin_listen;
    let _ = page::STARTED_MS.set(crate::clock::unix_ms());
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let h = std::thread::Builder::new()
        .name("ringside-admin".into())
        .spawn(move || {
            let rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                .enable_timer()
                .build();
            let mut rt = match rt {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(format!("admin runtime: {e}")));
                    return;
                }
            };
            rt.block_on(async move {
                let admin = Rc::new(RefCell::new(AdminState::new(shared.clone(), inbox)));
                let throttle = Rc::new(RefCell::new(access::Throttle::default()));
                let opts = ListenerOpts::new().reuse_port(false);
                let listener = match TcpListener::bind_with_config(addr, &opts) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = tx.send(Err(format!("cannot listen on admin address {addr}: {e}")));
                        return;
                    }
                };
                let _ = tx.send(Ok(()));
                // One accept future lives across the ticks: dropping an in-flight accept on
                // io_uring can lose a connection the kernel already accepted.
                let mut accept = Box::pin(listener.accept());
                let mut ticks = 0u64;
                let mut shortage = shortage::ShortageLog::default();
                let mut refused = shortage::RefusedLog::default();
                admin.borrow_mut().history.sample(&shared);
                loop {
                    monoio::select! {
                        a = &mut accept => {
                            match a {
                                Ok((s, peer)) => {
                                    let who = Peer { addr: Some(peer), throttle: throttle.clone() };
                                    monoio::spawn(crate::contain::contained(
                                        serve(shared.clone(), admin.clone(), s, who),
                                        &crate::metrics::TASK_PANICS,
                                        None,
                                    ));
                                }
                                // Out of descriptors: an accept fails at once for as long as
                                // that lasts, so wait a little rather than spin a core.
                                Err(e) => {
                                    crate::fd_limit::noted_exhaustion(&e);
                                    monoio::time::sleep(Duration::from_millis(10)).await;
                                }
                            }
                            accept = Box::pin(listener.accept());
                        }
                        _ = monoio::time::sleep(Duration::from_millis(100)) => {
                            admin.borrow_mut().sync();
                            ticks += 1;
                            shortage.tick(ticks);
                            refused.tick(ticks, &shared);
                            if ticks.is_multiple_of(history::EVERY_MS / 100) {
                                admin.borrow_mut().history.sample(&shared);
                            }
                            // Once a minute: expired session pins leave the store.
                            if ticks.is_multiple_of(600) {
                                crate::store::pins::purge_expired(shared.store, crate::clock::unix_ms());
                            }
                            // Up until every core has finished: `/readyz` says 503 all through
                            // the drain, and the state stays readable.
                            if shared.lifecycle.is_stopped() {
                                break;
                            }
                        }
                    }
                }
            });
        })
        .map_err(|e| format!("cannot start admin thread: {e}"))?;
    match rx.recv() {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("admin thread died during start".into()),
    }
}

/// Who is calling: the admin token or an `admin`-scoped client key (configured, or created
/// through this API) make an admin; a credential that is neither is a failure.
fn identify(shared: &Shared, head: &crate::http::Head) -> (access::Caller, Option<Actor>) {
    let Some(key) = crate::clients::presented(head).filter(|k| !k.is_empty()) else {
        return (access::Caller::Anonymous, None);
    };
    let generation = shared.current();
    if let Some(token) = &generation.config.server.admin_token
        && access::token_matches(key, token.expose().as_bytes())
    {
        return (access::Caller::Admin, Some(Actor::AdminToken));
    }
    let any_managed = shared.managed_keys.load(Ordering::Relaxed);
    let managed = |d: &[u8; 32]| {
        crate::clients::managed::lookup(shared.store, d, &generation.conn_labels)
            .filter(|_| any_managed)
    };
    match generation.config.clients.check(Some(key), true, managed) {
        crate::clients::Auth::Known(c) if c.has(crate::clients::Scope::Admin) => (
            access::Caller::Admin,
            Some(Actor::ClientKey(c.id.to_string())),
        ),
        _ => (access::Caller::Failed, None),
    }
}

/// The client side of one admin connection: its address and the shared failure throttle.
struct Peer {
    addr: Option<std::net::SocketAddr>,
    throttle: Rc<RefCell<access::Throttle>>,
}

impl Peer {
    /// Log, count and wait out one refused authentication.
    async fn failed(&self, head: &crate::http::Head) {
        access::log_failure(self.addr, head.method(), head.path());
        if let Some(a) = self.addr {
            let wait = self
                .throttle
                .borrow_mut()
                .failed(a.ip(), crate::clock::unix_ms());
            monoio::time::sleep(wait).await;
        }
    }

    /// A request with a credential from a prefix whose failures wait over a minute in line:
    /// refused without checking it, for how long.
    fn locked_out(&self, head: &crate::http::Head) -> Option<Duration> {
        let presents = head.get("authorization").is_some() || head.get("x-api-key").is_some();
        let ip = self.addr?.ip();
        presents
            .then(|| self.throttle.borrow().locked(ip, crate::clock::unix_ms()))
            .flatten()
    }

    fn succeeded(&self) {
        if let Some(a) = self.addr {
            self.throttle.borrow_mut().succeeded(a.ip());
        }
    }
}

/// 429 for a network whose failed credentials wait over a minute in line.
fn locked_out(wait: Duration, keep: bool) -> Vec<u8> {
    let secs = wait.as_secs().max(1).to_string();
    let body = serde_json::json!({"error": {
        "message": "too many failed admin credentials from this network: this one was not checked; try again later",
        "type": "rate_limit_error", "code": "admin_locked_out"}});
    whole(
        429,
        "application/json",
        &[("retry-after", secs.as_str())],
        body.to_string().as_bytes(),
        keep,
    )
}

/// The most decision records one answer carries (each is bounded: client strings are capped at
/// intake), so an answer stays within a few megabytes.
const MAX_DECISIONS_PAGE: usize = 1_000;

/// `GET /admin/decisions[?limit=N][&before=TS]` and `GET /admin/decisions/{request_id}`.
async fn decision_query(
    shared: &Shared,
    admin: &Rc<RefCell<AdminState>>,
    path: &str,
    query: Option<&str>,
) -> Option<(u16, serde_json::Value)> {
    let rest = path.strip_prefix("/admin/decisions")?;
    let id = match rest.strip_prefix('/') {
        Some(id) if !id.is_empty() => Some(id.to_string()),
        Some(_) | None if rest.is_empty() || rest == "/" => None,
        _ => return None,
    };
    let param = |name: &str| {
        query.and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        })
    };
    // Pages of at most MAX_DECISIONS_PAGE records; `before` (a record's ts_ms) asks for older.
    let limit = param("limit")
        .and_then(|v| v.parse().ok())
        .unwrap_or(50usize)
        .min(MAX_DECISIONS_PAGE);
    let before: Option<u64> = param("before").and_then(|v| v.parse().ok());
    // Ask for one more than the page (to know whether there is a next page), and for enough
    // to skip what is newer than `before`.
    let ask = if before.is_some() {
        usize::MAX
    } else {
        limit + 1
    };
    let rx = admin.borrow().query_decisions(id.as_deref(), ask);
    let cores = shared.current().config.server.workers.max(1);
    let mut all = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    let mut answered = 0;
    while answered < cores && std::time::Instant::now() < deadline {
        match rx.try_recv() {
            Ok(mut v) => {
                answered += 1;
                all.append(&mut v);
            }
            Err(_) => monoio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    all.sort_by_key(|r| std::cmp::Reverse(r.ts_ms));
    Some(match id {
        Some(_) => match all.into_iter().next() {
            Some(r) => (200, serde_json::json!(r)),
            None => (
                404,
                serde_json::json!({"error": {"message": "no decision with that request id (it may have left the ring)", "type": "invalid_request_error", "code": "not_found"}}),
            ),
        },
        None => {
            if let Some(b) = before {
                all.retain(|r| r.ts_ms < b);
            }
            let more = all.len() > limit;
            all.truncate(limit);
            let next = all.last().map(|r| r.ts_ms).filter(|_| more);
            (
                200,
                serde_json::json!({"decisions": all, "next_before": next}),
            )
        }
    })
}

/// A response as `head`'s method needs it (no body for `HEAD`).
fn answer_for(head: &crate::http::Head, response: Vec<u8>) -> Vec<u8> {
    if head.method() == "HEAD" {
        crate::http::response::head_only(response)
    } else {
        response
    }
}

/// The answer to a request refused before it reaches an endpoint (a locked-out network, a
/// foreign host, a missing or wrong credential...), after its wait; `None` when it may go on.
async fn gatekeep(
    shared: &Shared,
    peer: &Peer,
    head: &crate::http::Head,
    body_len: usize,
) -> Result<Option<Actor>, Vec<u8>> {
    let keep = head.keep_alive;
    if let Some(wait) = peer.locked_out(head) {
        return Err(locked_out(wait, keep));
    }
    let (caller, actor) = identify(shared, head);
    if let Err(refusal) = access::check(shared, head, caller, body_len) {
        // A wrong credential is a guess: logged, counted and slowed. A request with none (a
        // browser tab at the login form, its favicon) guesses nothing and is only refused.
        if caller == access::Caller::Failed
            && matches!(
                refusal,
                access::Refusal::Unauthorized | access::Refusal::ReadOnly
            )
        {
            peer.failed(head).await;
        }
        let body = refusal.body();
        return Err(whole(
            refusal.status(),
            "application/json",
            &[],
            &body,
            keep,
        ));
    }
    if caller == access::Caller::Admin {
        peer.succeeded();
    }
    Ok(actor)
}

/// The admin port's limits on what it reads.
const LIMITS: crate::http::server::Limits = crate::http::server::Limits {
    head: HeadLimits {
        max_head_bytes: 16 * 1024,
        max_headers: 64,
    },
    idle: Duration::from_secs(30),
    head_timeout: Duration::from_secs(10),
    max_body: 1 << 20,
    body_timeout: Duration::from_secs(10),
    buffer: 4096,
};

async fn serve(shared: Arc<Shared>, admin: Rc<RefCell<AdminState>>, stream: TcpStream, peer: Peer) {
    let peer = &peer;
    crate::http::server::serve(stream, LIMITS, |head, body, stream| {
        let (shared, admin) = (shared.clone(), admin.clone());
        async move { one(&shared, &admin, peer, head, body, stream).await }
    })
    .await;
}

/// One request: refused before an endpoint, or the endpoint's answer.
async fn one(
    shared: &Arc<Shared>,
    admin: &Rc<RefCell<AdminState>>,
    peer: &Peer,
    head: crate::http::Head,
    body: bytes::Bytes,
    stream: TcpStream,
) -> Option<TcpStream> {
    use crate::http::server::reply;
    let keep = head.keep_alive;
    let actor = match gatekeep(shared, peer, &head, body.len()).await {
        Ok(actor) => actor,
        Err(refused) => return reply(stream, answer_for(&head, refused), keep).await,
    };
    if matches!(head.method(), "GET" | "HEAD") && head.path() == "/admin/about" {
        let body = page::about(shared, actor.is_some()).to_string();
        let bytes = whole(200, "application/json", &[], body.as_bytes(), keep);
        return reply(stream, answer_for(&head, bytes), keep).await;
    }
    let change = audit::is_change(head.method()).then(|| (head.method(), head.path()));
    let before = change.and_then(|(m, p)| audit::before(shared, m, p));
    let (status, ctype, out) = endpoints::answer(shared, admin, &head, &body).await;
    // Every change that reached its endpoint and was done goes in the audit trail (a change
    // needs an admin credential, so its actor is known).
    if let (Some(what), Some(actor)) = (change, &actor)
        && status < 400
    {
        audit::record(shared, actor, what, status, before, &out);
    }
    // The status page says what it may load and where it may be framed.
    let extra = if ctype.starts_with("text/html") {
        page::HEADERS
    } else {
        &[]
    };
    let bytes = answer_for(&head, whole(status, ctype, extra, &out, keep));
    reply(stream, bytes, keep).await
}
