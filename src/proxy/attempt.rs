//! One upstream attempt against one candidate: take a pooled connection or connect, send, await
//! the head (first-byte timeout; a pooled connection that dies before any byte is retried once
//! on a fresh one), judge it (held stream, whole error body), and commit only what deserves it.

use super::answer::Buffered;
use super::exchange::{AttemptEnd, Ctx, Failed};
use super::judge::{self, Hold, Read, clean, describe};
use super::send::{HeadFail, send_and_await_head};
use super::watch::{ClientWatch, Raced};
use crate::audit::AttemptOutcome;
use crate::http::Head;
use crate::resilience::Site;
use crate::resilience::budget::Budget;
use crate::resilience::classify::{self, Verdict};
use crate::route::{Candidate, Entry};
use crate::timer;
use std::time::Duration;

fn now() -> u64 {
    crate::clock::now_ms()
}

fn failed(
    verdict: Verdict,
    kind: AttemptOutcome,
    detail: String,
    self_inflicted: bool,
) -> AttemptEnd {
    AttemptEnd::Failed(Failed {
        verdict,
        kind,
        detail,
        response: None,
        restated_from: None,
        self_inflicted,
    })
}

/// One upstream attempt against one candidate, judged before anything reaches the client:
/// `Ready` (a head worth delivering, for the loop to commit), `Failed` or `ClientGone`.
pub(super) async fn attempt(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    cand: Candidate,
    watch: &mut ClientWatch<'_>,
    budget: &Budget,
) -> AttemptEnd {
    let core = ctx.core;
    let cfg = core.config();
    let s = &cfg.resilience;
    let Some((provider, conn)) = cfg.connection(cand.connection) else {
        return failed(
            classify::transport(false),
            AttemptOutcome::ProtocolError,
            "unknown connection".into(),
            true,
        );
    };
    let provider_index = cfg.provider_of(cand.connection).unwrap_or(0);
    let target = &entry.targets[cand.target];
    // The model is rewritten in place (its span found when the body was checked) only when
    // the upstream's name differs.
    let span = match &ctx.record.model {
        Some(m) if *m != target.model => ctx.model_span.clone(),
        _ => None,
    };
    let body = match span {
        Some(span) => crate::dialect::facts::rewrite_model(&ctx.body, &span, &target.model),
        None => ctx.body.clone(),
    };
    let out = super::outbound::build(
        ctx.head,
        ctx.endpoint,
        provider,
        conn,
        &body,
        &ctx.request_id,
    );
    // One clock read for the budget, the deadlines, the send time and the pool.
    let sent_at = crate::clock::instant();
    let t_ms = crate::clock::ms_at(sent_at);
    let budget_left = budget.time_left(t_ms);
    let exec_left = ctx.exec_deadline.map_or(u64::MAX, |d| {
        d.saturating_duration_since(sent_at).as_millis() as u64
    });
    let left_ms = budget_left.min(exec_left);
    let deadline = sent_at + Duration::from_millis(left_ms);
    // A timeout caused by the client's own deadline says nothing about the upstream.
    let cut_by_deadline = left_ms < cfg.upstream.first_byte_timeout_ms;
    // When the execution budget (flow control) is what cut a wait, not the request's deadline
    // nor the upstream's own timeouts.
    let cut_by_execution = exec_left < budget_left;
    let head_cut_by_execution = exec_left < budget_left.min(cfg.upstream.first_byte_timeout_ms);
    let timeout_kind = |timeout: bool, kind: AttemptOutcome| {
        let binding = if kind == AttemptOutcome::Timeout {
            head_cut_by_execution
        } else {
            cut_by_execution
        };
        if timeout && binding {
            AttemptOutcome::ExecutionTimeout
        } else {
            kind
        }
    };
    let first_byte = Duration::from_millis(cfg.upstream.first_byte_timeout_ms.min(left_ms));
    let mut fresh_retry_used = false;
    let mut pool_ms = t_ms;
    let (mut up, head) = loop {
        let pooled = core.pool.borrow_mut().take(provider_index, pool_ms);
        let mut up = match pooled {
            Some(c) => c,
            None => {
                // A new connection is the rare path (pooled ones are reused): its ~6 KB of
                // connect and TLS state is boxed, not carried in every request's future.
                let connect = Box::pin(core.connector.connect(&provider.endpoint));
                let connect = timer::timeout_at(deadline, connect);
                match watch.race(std::pin::pin!(connect)).await {
                    Raced::ClientGone => return AttemptEnd::ClientGone,
                    Raced::Done(Err(_)) => {
                        return failed(
                            classify::transport(true),
                            timeout_kind(true, AttemptOutcome::ConnectTimeout),
                            "deadline reached while connecting".into(),
                            true,
                        );
                    }
                    Raced::Done(Ok(Ok(c))) => c,
                    Raced::Done(Ok(Err(e))) => {
                        let timeout = matches!(e, crate::upstream::ConnectError::Timeout);
                        return failed(
                            classify::transport(timeout),
                            e.outcome(),
                            e.to_string(),
                            false,
                        );
                    }
                }
            }
        };
        match send_and_await_head(&mut up, &out, first_byte, watch).await {
            Ok(head) => break (up, head),
            Err(HeadFail::ClientGone) => return AttemptEnd::ClientGone,
            Err(HeadFail::Failed {
                timeout,
                kind,
                detail,
                nothing_received,
            }) => {
                // A pooled connection that dies before any response byte was probably closed by
                // the upstream while idle: retry once on a fresh connection.
                if up.reused && nothing_received && !fresh_retry_used {
                    fresh_retry_used = true;
                    pool_ms = now();
                    continue;
                }
                return failed(
                    classify::transport(timeout),
                    timeout_kind(timeout, kind),
                    detail,
                    timeout && cut_by_deadline,
                );
            }
        }
    };
    let get = |n: &str| head.get_str(n).map(str::to_string);
    core.loads
        .borrow_mut()
        .observe_quota(cand.connection, &get, now(), crate::clock::unix_ms());
    learn_pacing(&core.shared.flow.gates[cand.connection], &head);
    let is_sse = head
        .get("content-type")
        .is_some_and(|v| v.starts_with(b"text/event-stream"));
    let site = Site {
        provider: provider_index,
        conn: cand.connection,
        model: &target.model,
        tenant: ctx.tenant,
    };
    if (200..300).contains(&head.status) {
        let st = &cfg.stream;
        if is_sse && st.guard && st.holdback_ms > 0 {
            match judge::hold_stream(&mut up, &head, st, deadline, watch).await {
                Read::ClientGone => return AttemptEnd::ClientGone,
                Read::Failed { detail, timeout } => {
                    return failed(
                        classify::transport(timeout),
                        timeout_kind(timeout, AttemptOutcome::StreamError),
                        detail,
                        timeout && cut_by_deadline,
                    );
                }
                Read::Ok(Hold::Stalled) => {
                    // Nothing useful in time: retried elsewhere; says nothing certain about the
                    // key (a slow-thinking model), so nothing is cooled.
                    return failed(
                        classify::transport(true),
                        AttemptOutcome::StreamReadinessTimeout,
                        format!(
                            "no useful stream event within {} ms",
                            st.readiness_timeout_ms
                        ),
                        true,
                    );
                }
                Read::Ok(Hold::Error(text)) => {
                    let x = judge::Exchange {
                        provider: &provider.id,
                        status: 200,
                        head: &head,
                        body: text.as_bytes(),
                        request: &ctx.body,
                    };
                    let (verdict, restated) = judge::judge(s, &x, crate::clock::unix_ms());
                    return AttemptEnd::Failed(Failed {
                        kind: AttemptOutcome::StreamError,
                        detail: format!("in-band stream error: {}", clean(&text, conn)),
                        restated_from: restated.map(|r| r.from),
                        response: None,
                        verdict,
                        self_inflicted: false,
                    });
                }
                Read::Ok(Hold::Commit) => {}
            }
        }
        core.loads.borrow_mut().observe_latency(
            cand.connection,
            crate::clock::since(sent_at).as_millis() as u64,
        );
        core.record_success(site);
        return AttemptEnd::Ready {
            up,
            head,
            provider_index,
        };
    }
    match judge::read_error_body(&mut up, &head, deadline, watch).await {
        Read::ClientGone => AttemptEnd::ClientGone,
        Read::Failed { detail, timeout } => failed(
            classify::transport(timeout),
            timeout_kind(timeout, AttemptOutcome::Reset),
            detail,
            timeout && cut_by_deadline,
        ),
        Read::Ok(judge::ErrorBody {
            body,
            complete,
            oversized,
        }) => {
            let x = judge::Exchange {
                provider: &provider.id,
                status: head.status,
                head: &head,
                body: &body,
                request: &ctx.body,
            };
            let (verdict, restated) = judge::judge(s, &x, crate::clock::unix_ms());
            if complete && head.keep_alive && !core.drain.is_draining() {
                let _ = up.buf.split();
                core.pool.borrow_mut().put(provider_index, up, now());
            }
            let kind = match AttemptOutcome::of_status(head.status) {
                AttemptOutcome::Ok => AttemptOutcome::Http4xx,
                k => k,
            };
            let detail = if oversized {
                format!(
                    "upstream {}: an error body over {} bytes (not relayed)",
                    head.status,
                    judge::MAX_ERROR_BODY
                )
            } else {
                format!("upstream {}: {}", head.status, describe(&body, &head, conn))
            };
            AttemptEnd::Failed(Failed {
                kind,
                detail,
                restated_from: restated.as_ref().map(|r| r.from),
                // An oversized body is answered with Ringside's own error, never relayed.
                response: (!oversized).then(|| {
                    Box::new(Buffered {
                        status: verdict.status,
                        head,
                        body,
                    })
                }),
                verdict,
                self_inflicted: false,
            })
        }
    }
}

/// Let the connection's gate learn from the upstream's rate-limit headers.
fn learn_pacing(gate: &crate::flow::gate::Gate, head: &Head) {
    let num = |n: &str| head.get_str(n).and_then(|v| v.trim().parse::<f64>().ok());
    let (rem, lim, reset) = if head.get("x-ratelimit-remaining-requests").is_some() {
        (
            num("x-ratelimit-remaining-requests"),
            num("x-ratelimit-limit-requests"),
            head.get_str("x-ratelimit-reset-requests")
                .and_then(crate::resilience::hints::parse_duration),
        )
    } else if head.get("anthropic-ratelimit-requests-remaining").is_some() {
        (
            num("anthropic-ratelimit-requests-remaining"),
            num("anthropic-ratelimit-requests-limit"),
            head.get_str("anthropic-ratelimit-requests-reset")
                .and_then(|v| crate::resilience::hints::parse_reset(v, crate::clock::unix_ms())),
        )
    } else {
        return;
    };
    gate.learn(rem, lim, reset);
}
