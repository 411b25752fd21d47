//! The data plane: one task per client connection, one request state machine per request.
//!
//! The life of a request. The drivers (`connection`, `request`, `attempts`) sequence the
//! phases; a phase returns a value and never calls the next one or a driver (checked by
//! `tests/layering.rs`).
//!
//! | phase    | file                     | returns                                            |
//! |----------|--------------------------|----------------------------------------------------|
//! | intake   | `caller.rs`, `intake.rs` | the caller from the head; body, facts, lease, route, quota (or the refusal, answered) |
//! | select   | `select.rs`              | a candidate and its breaker admission, or the exclusions |
//! | decide   | `decide.rs`              | `Idle::{Wait, GiveUp}` when nothing is usable; `Decision::{Next, Fail, PassThrough}` after a failure |
//! | admit    | `admit.rs`               | `Admission::{Go(permit), Saturated, LeaseMoved, ..}` |
//! | attempt  | `attempt.rs`             | `AttemptEnd::{Ready, Failed, ClientGone}`           |
//! | judge    | `judge.rs`               | a `Verdict` (restated, classified)                  |
//! | deliver  | `deliver.rs`, `forward/` | the commit: `AttemptEnd::Done { keep_alive }`       |
//! | answer   | `answer.rs`              | what the client is told when Ringside stops trying  |
//! | finalize | `request.rs`             | metrics, the access log, the decision ring, once    |
//!
//! `exchange.rs` (the request's context and the attempt's end) and `respond.rs` (writing
//! Ringside's own answers) are leaves every phase may use. Before `deliver` writes the first
//! byte anything may be retried within the budget; after it, nothing is replayed.
//!
//! *Arguments in place.* A held stream's memory is mostly its connection's task: one future
//! holding every level of the path at its longest wait (`serve` → `handle` → `run` →
//! `commit` → `relay`). An `async fn` moves its arguments into locals when it first runs and
//! keeps their first slots too, so each argument is stored twice; those five are plain `fn`s
//! returning an `async move` block, which uses its captures where they are. With the other
//! rules (no value kept across two waits that only one of them needs, once-per-stream and
//! rare waits boxed, and state that is rare or off by default boxed too) the task is 3,568
//! bytes: the allocator's 3.5 KiB class (`connection::tests::connection_future_size_is_bounded`).
//! Beside it a held stream keeps of its upstream's response head only the headers judging may
//! read (`forward::Stream::start`).

mod admit;
pub mod answer;
pub mod attempt;
pub mod attempts;
mod bill;
mod body_end;
mod caller;
mod client_body;
mod client_facts;
mod client_head;
mod connection;
pub mod deadline;
mod decide;
mod deliver;
mod exchange;
pub mod forward;
mod give_up;
mod h2_failure;
mod idempotent;
mod intake;
pub mod judge;
mod keepalive;
mod learn;
pub mod lease;
mod limit_reset;
mod models;
pub mod oauth;
pub mod outbound;
pub mod prober;
mod redact;
mod relay_failure;
pub mod request;
mod respond;
mod select;
mod send;
mod stop;
mod translated;
mod upstream_request;
mod usage_wall;
pub mod watch;

pub use connection::serve_client;
pub use connection::tls::serve as serve_tls_client;
pub use respond::{respond_error, respond_error_to, respond_json};
