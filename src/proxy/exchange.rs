//! What one request carries through its phases: the context (`Ctx`: the head, the body once
//! read, the decision record, the caller), what the request knows of its connection (`Conn`),
//! how one attempt ended (`AttemptEnd`), and the plain data those hold (a buffered error
//! answer, a lease binding, a request's dealings with an account's usage wall, a readiness
//! wait). A leaf of `proxy`: it imports no other file of `proxy` (`tests/layering.rs`), so
//! every phase may use it and none is tied to another through it.

use crate::audit::{AttemptOutcome, Record};
use crate::dialect::{Dialect, Endpoint};
use crate::http::Head;
use crate::ids::ConnId;
use crate::resilience::usage_wall::lane::{Decision, Waits};
use crate::route::Candidate;
use crate::state::core::Core;
use crate::state::generation::CoreGen;
use crate::upstream::UpConn;
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// The request headers read after an event stream is committed: the access log's. The rest of
/// a held stream's request head (an SDK sends 0.6–1 KB of it) is let go at the stream's first
/// write (`forward::relay`), like its body.
pub(crate) const USER_AGENT: &str = "user-agent";
pub(crate) const FORWARDED_FOR: &str = "x-forwarded-for";
/// (Its parent id is the parent of Ringside's span in an exported trace, `telemetry`: kept
/// after the commit only while spans are exported.)
pub(crate) const TRACEPARENT: &str = "traceparent";

/// Whether a request header is read after an event stream is committed.
pub(crate) fn read_after_commit(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(USER_AGENT.as_bytes())
        || name.eq_ignore_ascii_case(FORWARDED_FOR.as_bytes())
        || (name.eq_ignore_ascii_case(TRACEPARENT.as_bytes()) && crate::telemetry::exporting())
}

/// How one attempt ended.
pub(crate) enum AttemptEnd {
    /// The upstream answered with a head worth delivering: the loop commits it (`deliver`).
    Ready {
        up: UpConn,
        head: Head,
        provider_index: usize,
    },
    /// The response was committed to the client (successfully or not): the request is over.
    /// `delivered`: how its body ended, which is the attempt's final verdict.
    Done {
        keep_alive: bool,
        delivered: Delivered,
    },
    /// Failed before commit: judged, and possibly worth trying elsewhere.
    Failed(Failed),
    ClientGone,
}

/// How a committed answer's body ended: the attempt's verdict for the resilience engine.
pub(crate) enum Delivered {
    /// A complete body, a stream with its terminal event: a success.
    Clean,
    /// The upstream failed it after the commit: a reset, a stall, a missing terminal event, or
    /// an in-band error event (judged like an error answer).
    Failed(crate::resilience::classify::Verdict),
    /// Nothing to learn about the upstream: the client went away or stopped reading, or the
    /// request's own execution budget ended it.
    Unjudged,
}

/// The first stage of a request: the facts of its head, fixed once it is read, and what is
/// written of it (the decision record, never read back to decide). Intake refines who is
/// calling once a client key is known (its tenant, its class, whether it may see names).
pub(crate) struct Request<'a> {
    pub core: &'a Core,
    /// The configuration generation this request started on: it keeps it to its end, whatever
    /// a reload does meanwhile (`state::reload`).
    pub generation: &'a CoreGen,
    /// The client's request head. Mutable for one reason: once an event stream is committed,
    /// it keeps only what the access log reads (`forward::relay`).
    pub head: &'a mut Head,
    pub dialect: Dialect,
    pub keep_alive: bool,
    pub record: Record,
    pub started: Instant,
    /// The tenant: a client key's, or without keys the client's address (hashed); 0 when
    /// neither is known.
    pub tenant: u64,
    /// 0 (first) to 9, from `x-ringside-priority`; 5 by default.
    pub priority: u8,
    /// The client connection: its place under the caps, its socket, its next request's wait.
    pub conn: &'a ClientConn<'a>,
    /// Whether this client may see provider and connection names and upstream error text in
    /// answers (the operator: open mode or an `admin`-scoped key). Tenants' keys get the
    /// request id instead; the decision record keeps everything.
    pub reveal: bool,
    /// A waiting stream's head went out (`proxy::keepalive`): the request's last words are
    /// an event of this endpoint's stream, not an answer of their own.
    pub early_head: Option<Endpoint>,
    /// The tenant has spent this share (percent, 80 or more) of this budget: said on the
    /// answer (`x-ringside-budget-warning`).
    pub budget_warning: Option<(u8, crate::flow::spend::Limit)>,
}

impl<'a> Request<'a> {
    /// The request's configuration (its generation's).
    pub fn config(&self) -> &'a crate::config::Config {
        &self.generation.config
    }

    /// `x-ringside-attempts` as this client may see it: the whole trail, or only the count.
    pub fn attempts_header(&self, current: Option<(&str, u16)>) -> String {
        if self.reveal {
            self.record.attempts_header(current)
        } else {
            (self.record.attempts.len() + usize::from(current.is_some())).to_string()
        }
    }
}

/// The second stage: what intake admitted, every field real (nothing is a placeholder until
/// intake fills it).
pub(crate) struct Admitted {
    pub endpoint: Endpoint,
    /// The client's body; the relay lets it go at the answer's first byte (nothing is retried
    /// after it).
    pub body: Bytes,
    /// Where the top-level `model` value is in `body` (found by the body check, so that
    /// rewriting it does not walk the body again); 32-bit, as bodies are (`max_body_bytes`),
    /// since this lives in every held stream's task.
    pub model_span: Option<std::ops::Range<u32>>,
    /// The body asks for an event stream (`"stream": true`).
    pub stream: bool,
    /// The client key, when keys are configured (shared with the configuration).
    pub client: Option<std::sync::Arc<crate::clients::Client>>,
    /// The exclusive lease this request is fenced to (only its connection may serve it).
    /// Boxed: the context lives in every held stream's task (8 bytes there instead of 72).
    pub lease: Option<Box<Binding>>,
}

/// An admitted request on its way to an upstream: its head's facts (through `Deref`), what
/// intake admitted, and what the attempts hold (the execution budget's end while a flow permit
/// is held, the request's dealings with an account's usage wall and OAuth token).
pub(crate) struct Ctx<'r, 'a> {
    pub req: &'r mut Request<'a>,
    pub admitted: Admitted,
    /// Set while a flow permit is held: when the execution budget ends.
    pub exec_deadline: Option<Instant>,
    /// The request's dealings with a Claude subscription account's usage wall or an OAuth
    /// token (only when such an account was tried).
    pub lane: Option<Box<LaneRequest>>,
    /// The request read for targets of another API (only when its route reaches one).
    pub translation: Option<Box<crate::translate::session::Session>>,
    /// The request's bill: its tenant's quota place and budget reservation, its own cap
    /// (only when one of them applies, `proxy::bill`).
    pub bill: Option<Box<crate::flow::bill::RequestBill>>,
}

impl<'a> std::ops::Deref for Ctx<'_, 'a> {
    type Target = Request<'a>;
    fn deref(&self) -> &Request<'a> {
        self.req
    }
}

impl<'a> std::ops::DerefMut for Ctx<'_, 'a> {
    fn deref_mut(&mut self) -> &mut Request<'a> {
        self.req
    }
}

/// An attempt that failed before anything reached the client.
pub(crate) struct Failed {
    pub verdict: crate::resilience::classify::Verdict,
    /// Metrics outcome (`http_429`, `tls_error`, ...).
    pub kind: AttemptOutcome,
    pub detail: String,
    /// The upstream's error answer, read whole (absent for transport failures).
    pub response: Option<Box<Buffered>>,
    pub restated_from: Option<u16>,
    /// Cut short by the request's own deadline: says nothing about the upstream.
    pub self_inflicted: bool,
    /// A pooled connection the upstream had closed while idle failed before any byte of the
    /// answer: the request is sent again (a new attempt), the key is not blamed.
    pub stale_pooled: bool,
}

impl Failed {
    /// A failure without an answer to keep (transport, timeout, broken framing).
    pub fn new(
        verdict: crate::resilience::classify::Verdict,
        kind: AttemptOutcome,
        detail: String,
        self_inflicted: bool,
    ) -> Failed {
        Failed {
            verdict,
            kind,
            detail,
            response: None,
            restated_from: None,
            self_inflicted,
            stale_pooled: false,
        }
    }
}

/// What the connection keeps for its requests, for its whole life.
pub struct ClientConn<'a> {
    /// The connection's place under the connection caps.
    pub ticket: crate::state::conn_caps::Ticket<'a>,
    /// The connection's socket (writes that do not wait, `http::nowait`).
    pub fd: std::os::fd::RawFd,
    /// Where a request leaves its client watch's still-armed wait, for the connection's wait
    /// for its next request (`watch::ClientWatch::finish`).
    pub next_wait: std::cell::Cell<Option<Readiness>>,
}

/// What a request knows of the client connection it came on.
pub struct Conn<'a> {
    pub link: &'a ClientConn<'a>,
    /// The connection's last request (`max_requests_per_connection`): answered with close.
    pub last_request: bool,
}

/// An upstream error answer read whole while judging it.
pub struct Buffered {
    /// After restatement.
    pub status: u16,
    pub head: Head,
    pub body: Bytes,
}

/// A request bound to its lease: only `conn` may serve it.
#[derive(Clone, Debug)]
pub struct Binding {
    pub owner: String,
    pub generation: u64,
    pub client: String,
    pub conn: ConnId,
    /// Moves to another connection made for this request (bounded).
    pub moves: u8,
}

/// A readiness wait on the client socket. It owns a reference to the socket (the split
/// halves' shared `Rc`), so it may outlive the request that armed it.
pub type Readiness = Pin<Box<dyn Future<Output = std::io::Result<()>>>>;

/// One request's dealings with an account's side state: its usage wall and its OAuth token
/// (boxed in `Ctx`: only opted-in or refreshable OAuth accounts make one).
#[derive(Default)]
pub(crate) struct LaneRequest {
    /// The request's waits on the lane, from its first (the lane's max-wait counts from it).
    pub(super) waits: Waits,
    /// The last attempt was sent with the lane's header.
    pub(super) sent_slow: bool,
    /// Sends on the lane's word so far.
    pub(super) sends: u8,
    /// The limit reset was tried for this request (once per request).
    pub(super) reset_tried: bool,
    /// The lane's word on the last answer, for the attempt loop.
    pub(super) decision: Option<Decision>,
    /// The candidate to send to again, and after how many ms (the attempt loop's next pick).
    pub(super) same: Option<(Candidate, u64)>,
    /// The OAuth access token's version the last attempt was sent with (`proxy::oauth`).
    pub(super) token_version: u64,
    /// The access token was refreshed for this request already (once per request).
    pub(super) token_refreshed: bool,
    /// The refresh token was refused for good: why (the answer expires the connection).
    pub(super) token_dead: Option<String>,
}
