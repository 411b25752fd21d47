//! The attempt loop under one budget: candidates (dropping cooling / locked / breaker-open /
//! ineligible ones, each with its reason) -> select -> connect -> send -> await head -> judge
//! -> stream | retry the same target after a short cooldown | next target | wait | fail.

use super::answer::{self, Buffered, LastFailure};
use super::judge::{self, Hold, Read};
use super::record::{AttemptRecord, Excluded};
use super::request::{AttemptEnd, Ctx, commit, finish_error};
use super::watch::{ClientWatch, Raced};
use crate::dialect::ApiError;
use crate::flow::settings::Knob;
use crate::flow::{self, Ask, Refused};
use crate::http::head::parse_response;
use crate::http::io::read_more;
use crate::http::{Head, HeadLimits};
use crate::resilience::breaker::{Admit, release_probe};
use crate::resilience::budget::{Budget, parse_deadline_header};
use crate::resilience::classify::{self, Verdict};
use crate::resilience::{Exclusion, Site};
use crate::route::eligibility::Needs;
use crate::route::load::InFlight;
use crate::route::{Candidate, Entry};
use crate::store::leases::Outcome;
use crate::upstream::UpConn;
use monoio::io::AsyncWriteRentExt;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use std::time::{Duration, Instant};

fn now() -> u64 {
    crate::clock::now_ms()
}

/// The attempt loop. Returns whether the client connection stays open.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    needs: &Needs,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut bytes::BytesMut,
) -> bool {
    let core = ctx.core;
    let s = &core.shared.config.resilience;
    let deadline_ms = ctx
        .head
        .get_str("x-ringside-deadline-ms")
        .and_then(|v| parse_deadline_header(v, crate::clock::unix_ms()))
        .or(entry.deadline_ms)
        .unwrap_or(s.deadline_ms);
    let max_attempts = core.config().upstream.max_attempts;
    let mut budget = Budget::new(max_attempts, now(), deadline_ms, s.max_wait_ms);
    let mut watch = ClientWatch::start(rd, std::mem::take(buf));
    let mut tried: Vec<Candidate> = Vec::new();
    let mut last: Option<LastFailure> = None;
    let mut excluded: Vec<(Candidate, Exclusion)> = Vec::new();
    // Connections that refused us (saturated with on_saturation = "reject") this request.
    let mut saturated: Vec<Candidate> = Vec::new();
    // A local-overload answer (queue full / queue timeout / execution timeout).
    let mut refusal: Option<ApiError> = None;
    // The connection that answered (for the session pin).
    let mut served: Option<usize> = None;
    // Session affinity: the pinned connection goes first while it is usable.
    let ttl = core.config().affinity_ttl_ms;
    let pin_key = if ttl > 0 {
        crate::store::pins::session_key(ctx.head)
    } else {
        None
    };
    // A leased request is served only by its lease's connection: no soft pin.
    let pin_key = pin_key.filter(|_| ctx.lease.is_none());
    let had_pin = pin_key
        .as_deref()
        .and_then(|k| core.pinned(k, crate::clock::unix_ms()));
    let pinned_conn = had_pin.map(|(c, _)| c);
    // Set when every eligible connection turned out to be leased by other sessions.
    let mut lease_capacity: Option<ApiError> = None;
    let result = loop {
        core.sync();
        let t = now();
        if budget.expired(t) {
            break None;
        }
        let unix_now = crate::clock::unix_ms();
        let bound = ctx.lease.as_ref().map(|b| b.conn);
        excluded.clear();
        let mut pick = None;
        {
            // Filter first, then let the strategy choose among the usable candidates.
            let shared = &core.shared;
            let loads = core.loads.borrow();
            let load = |c: usize| loads.load(c, &shared.in_flight, t);
            let mut tables = core.tables.borrow_mut();
            let mut selector = core.selector.borrow_mut();
            let ordered =
                shared
                    .routes
                    .candidates_where(entry, ctx.dialect, &mut selector, &load, |c| {
                        let why = if tried.contains(&c) {
                            Some(Exclusion::Tried)
                        } else if saturated.contains(&c) {
                            Some(Exclusion::Ineligible("saturated"))
                        } else if ctx
                            .client
                            .as_ref()
                            .is_some_and(|k| !k.may_use(c.connection))
                        {
                            Some(Exclusion::Ineligible("not_allowed_for_key"))
                        } else if let Err(why) = entry.targets[c.target].caps.admits(needs) {
                            Some(Exclusion::Ineligible(why))
                        } else if let Some(e) = tables.blocked(s, site(ctx, entry, c), t) {
                            Some(e)
                        } else if bound == Some(c.connection) {
                            None
                        } else if let Some(until) =
                            shared.leases.leased_until(c.connection, unix_now)
                        {
                            Some(Exclusion::Leased {
                                ms: until - unix_now,
                            })
                        } else if bound.is_some() {
                            // Usable and free, but not this request's lease: a place to move to.
                            Some(Exclusion::Ineligible(NOT_LEASED))
                        } else {
                            None
                        };
                        match why {
                            Some(e) => {
                                excluded.push((c, e));
                                false
                            }
                            None => true,
                        }
                    });
            let pinned_first =
                pinned_conn.and_then(|pc| ordered.iter().position(|c| c.connection == pc));
            let order = pinned_first
                .into_iter()
                .chain((0..ordered.len()).filter(|&k| Some(k) != pinned_first));
            for k in order {
                let c = ordered[k];
                match tables.admit(s, &shared.probes, site(ctx, entry, c), t) {
                    Ok(admit) => {
                        pick = Some((c, admit));
                        break;
                    }
                    Err(e) => excluded.push((c, e)),
                }
            }
        }
        let Some((cand, admit)) = pick else {
            // A lease whose connection cannot serve moves to a free eligible one (same
            // generation), as health, cooldown, quota and model rules have the final say.
            if let Some(b) = ctx.lease.clone() {
                let mut free: Vec<usize> = Vec::new();
                for (c, e) in &excluded {
                    if *e == Exclusion::Ineligible(NOT_LEASED) && !free.contains(&c.connection) {
                        free.push(c.connection);
                    }
                }
                if !free.is_empty() && b.moves < 2 {
                    let why = move_reason(&excluded, b.conn);
                    match super::lease::transition(ctx, &b, &free, why).await {
                        Outcome::Transitioned(l) => {
                            if let (Some(lb), Some(i)) =
                                (ctx.lease.as_mut(), core.shared.leases.index(&l.connection))
                            {
                                lb.conn = i;
                                lb.moves += 1;
                            }
                            continue;
                        }
                        Outcome::Busy { .. } | Outcome::Reused(_) => {}
                        Outcome::Unavailable => {
                            refusal = Some(ApiError::new(
                                503,
                                "LEASE_SERVICE_UNAVAILABLE",
                                "the lease store did not answer; try again",
                            ));
                            break None;
                        }
                        _ => {
                            refusal = super::lease::refence(ctx, &b).err();
                            if refusal.is_some() {
                                break None;
                            }
                        }
                    }
                }
            }
            // Nothing usable now: wait for the earliest short recovery if the budget allows.
            let earliest = excluded
                .iter()
                .filter(|(_, e)| e.waitable())
                .filter_map(|(_, e)| e.remaining_ms())
                .min();
            match earliest {
                Some(ms) if budget.can_wait(ms + 5, t) => {
                    let ms = ms + 5;
                    ctx.record.waited_ms += ms;
                    budget.waited(ms);
                    let sleep = monoio::time::sleep(Duration::from_millis(ms));
                    if let Raced::ClientGone = watch.race(sleep).await {
                        ctx.record.status = 499;
                        ctx.record.outcome = "client_gone";
                        break Some(false);
                    }
                    continue;
                }
                _ => {
                    lease_capacity = capacity_answer(ctx, &excluded, unix_now);
                    break None;
                }
            }
        };
        let site = site(ctx, entry, cand);
        if budget.attempts_left() == 0 {
            if admit == Admit::Probe {
                release_probe(&core.shared.probes.0[site.provider]);
            }
            break None;
        }
        // Admission: a slot of the connection (global across cores), or a place in its queue.
        let ask = Ask {
            conn: cand.connection,
            tenant: ctx.tenant,
            priority: ctx.priority,
            time_left_ms: budget.time_left(t),
        };
        let watch_ref = &mut watch;
        let admitted = flow::acquire(core.shared.flow, &core.flow, ask, t, |rx, ms| async move {
            let wait = monoio::time::timeout(Duration::from_millis(ms), rx);
            match watch_ref.race(wait).await {
                Raced::ClientGone => None,
                Raced::Done(Ok(Ok(permit))) => Some(Some(permit)),
                Raced::Done(_) => Some(None),
            }
        })
        .await;
        let permit = match admitted {
            Ok(p) => p,
            Err(e) => {
                if admit == Admit::Probe {
                    release_probe(&core.shared.probes.0[site.provider]);
                }
                match e {
                    None => {
                        ctx.record.status = 499;
                        ctx.record.outcome = "client_gone";
                        break Some(false);
                    }
                    Some(Refused::Saturated) => {
                        saturated.push(cand);
                        continue;
                    }
                    Some(r) => {
                        refusal = Some(answer::refused(r, &ctx.record));
                        break None;
                    }
                }
            }
        };
        // The lease may have been released, renewed elsewhere or moved while this request
        // waited for admission: check it again right before dispatch.
        if let Some(b) = ctx.lease.clone() {
            match super::lease::refence(ctx, &b) {
                Ok(c) if c == cand.connection => {}
                Ok(c) => {
                    if admit == Admit::Probe {
                        release_probe(&core.shared.probes.0[site.provider]);
                    }
                    if let Some(lb) = ctx.lease.as_mut() {
                        lb.conn = c;
                    }
                    drop(permit);
                    continue;
                }
                Err(e) => {
                    if admit == Admit::Probe {
                        release_probe(&core.shared.probes.0[site.provider]);
                    }
                    drop(permit);
                    refusal = Some(e);
                    break None;
                }
            }
        }
        if !budget.try_attempt(now()) {
            if admit == Admit::Probe {
                release_probe(&core.shared.probes.0[site.provider]);
            }
            break None;
        }
        let exec_ms = core
            .shared
            .flow
            .effective(cand.connection, Knob::ExecutionMaxWaitMs)
            .value
            .max(core.config().upstream.first_byte_timeout_ms);
        ctx.exec_deadline = Some(Instant::now() + Duration::from_millis(exec_ms));
        let t0 = Instant::now();
        let end = {
            let _in_flight = InFlight::enter(&core.shared.in_flight[cand.connection]);
            attempt(ctx, entry, cand, &mut watch, wr, &budget).await
        };
        // The attempt has closed or pooled its upstream connection: only now free the slot.
        drop(permit);
        ctx.exec_deadline = None;
        if admit == Admit::Probe {
            release_probe(&core.shared.probes.0[site.provider]);
        }
        match end {
            AttemptEnd::Done { keep_alive } => {
                served = Some(cand.connection);
                break Some(keep_alive);
            }
            AttemptEnd::ClientGone => {
                push(
                    ctx,
                    entry,
                    cand,
                    t0,
                    "client_gone",
                    None,
                    "fail",
                    &budget,
                    None,
                );
                ctx.record.status = 499;
                ctx.record.outcome = "client_gone";
                break Some(false);
            }
            AttemptEnd::Failed {
                verdict,
                kind,
                detail,
                response,
                restated_from,
                self_inflicted,
            } => {
                if kind == "execution_timeout" {
                    core.shared.flow.gates[cand.connection]
                        .stats
                        .execution_timeouts
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    push(
                        ctx,
                        entry,
                        cand,
                        t0,
                        kind,
                        None,
                        "fail",
                        &budget,
                        Some(detail),
                    );
                    refusal = Some(answer::execution_timeout(&ctx.record));
                    break None;
                }
                if !self_inflicted {
                    core.record_failure(site, &verdict);
                }
                let pass = !verdict.retryable;
                let decision = if pass {
                    "pass_through"
                } else if budget.attempts_left() == 0 {
                    "fail"
                } else {
                    "next"
                };
                push(
                    ctx,
                    entry,
                    cand,
                    t0,
                    kind,
                    Some(&verdict),
                    decision,
                    &budget,
                    Some(detail.clone()),
                );
                if let Some(a) = ctx.record.attempts.last_mut() {
                    a.restated_from = restated_from;
                }
                // Try this candidate again only if the failure put it on a timer (then it is
                // excluded by that timer, and a short one may be waited out).
                let still_usable = core.tables.borrow_mut().blocked(s, site, now()).is_none();
                if still_usable {
                    tried.push(cand);
                }
                last = Some(LastFailure {
                    verdict,
                    detail,
                    response,
                    label: label(ctx, cand),
                    conn: cand.connection,
                });
                if pass {
                    break None;
                }
            }
        }
    };
    *buf = watch.finish().await;
    if let (Some(key), Some(conn)) = (&pin_key, served)
        && (200..300).contains(&ctx.record.status)
    {
        core.pin(key, conn, ttl, had_pin, crate::clock::unix_ms());
    }
    if let Some(keep) = result {
        return keep;
    }
    if let Some(err) = refusal.or(lease_capacity) {
        return finish_error(ctx, wr, &err, true).await;
    }
    let excl: Vec<Excluded> = excluded
        .iter()
        .filter(|(_, e)| *e != Exclusion::Tried)
        .map(|(c, e)| {
            let t = &entry.targets[c.target];
            let (p, conn) = names(ctx, c.connection);
            Excluded {
                target: format!("{p}/{}", t.model),
                connection: conn,
                reason: e.label(),
                remaining_s: e.remaining_ms().map(|ms| ms.div_ceil(1000)),
            }
        })
        .collect();
    answer::give_up(ctx, wr, &budget, last, &excluded, excl).await
}

const NOT_LEASED: &str = "not_this_lease";

/// Why a lease moves: what keeps its connection from serving this request.
fn move_reason(excluded: &[(Candidate, Exclusion)], conn: usize) -> &'static str {
    match excluded.iter().find(|(c, _)| c.connection == conn) {
        Some((_, Exclusion::Lockout { .. })) => "MODEL_INELIGIBLE",
        Some((_, Exclusion::Terminal(crate::resilience::cooldown::Terminal::CreditsExhausted))) => {
            "QUOTA_UNAVAILABLE"
        }
        Some((_, Exclusion::Ineligible(_))) => "CONNECTION_INELIGIBLE",
        Some(_) => "HEALTH_OR_COOLDOWN",
        None => "MODEL_INELIGIBLE",
    }
}

/// 429 `LEASE_CAPACITY_UNAVAILABLE` when what stands between the request and a connection is
/// other sessions' leases (not ordinary unavailability, which keeps its own answers).
fn capacity_answer(
    ctx: &Ctx<'_>,
    excluded: &[(Candidate, Exclusion)],
    unix_now: u64,
) -> Option<ApiError> {
    let leased: Vec<u64> = excluded
        .iter()
        .filter_map(|(_, e)| match e {
            Exclusion::Leased { ms } => Some(*ms),
            _ => None,
        })
        .collect();
    let earliest = leased.iter().min()?;
    let others_only = excluded.iter().all(|(c, e)| {
        matches!(e, Exclusion::Leased { .. } | Exclusion::Tried)
            || ctx.lease.as_ref().is_some_and(|b| b.conn == c.connection)
    });
    others_only.then(|| {
        let mut conns: Vec<usize> = excluded.iter().map(|(c, _)| c.connection).collect();
        conns.sort_unstable();
        conns.dedup();
        super::lease::capacity(
            super::lease::retry_after_s(Some(unix_now + earliest), unix_now),
            conns.len(),
        )
    })
}

fn site<'a>(ctx: &Ctx<'_>, entry: &'a Entry, c: Candidate) -> Site<'a> {
    Site {
        provider: ctx.core.config().provider_of(c.connection).unwrap_or(0),
        conn: c.connection,
        model: &entry.targets[c.target].model,
    }
}

fn names(ctx: &Ctx<'_>, conn: usize) -> (String, String) {
    ctx.core
        .shared
        .conn_labels
        .get(conn)
        .cloned()
        .unwrap_or_default()
}

fn label(ctx: &Ctx<'_>, c: Candidate) -> String {
    let (p, conn) = names(ctx, c.connection);
    format!("{p}/{conn}")
}

#[allow(clippy::too_many_arguments)]
fn push(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    c: Candidate,
    t0: Instant,
    outcome: &'static str,
    v: Option<&Verdict>,
    decision: &'static str,
    budget: &Budget,
    detail: Option<String>,
) {
    let (provider, connection) = names(ctx, c.connection);
    ctx.core.metrics.attempt(c.connection, outcome);
    ctx.record.attempts.push(AttemptRecord {
        provider,
        connection,
        model: entry.targets[c.target].model.clone(),
        outcome,
        status: v.map(|v| v.status).filter(|&s| s != 0),
        reason: v.map(|v| v.reason.as_str()),
        restated_from: None,
        retry_after_ms: v.and_then(|v| v.hint.map(|h| h.ms).or(v.cooldown_ms)),
        decision,
        attempts_left: budget.attempts_left(),
        ms_left: budget.time_left(now()),
        detail,
        ms: t0.elapsed().as_millis() as u64,
    });
}

fn failed(
    verdict: Verdict,
    kind: &'static str,
    detail: String,
    self_inflicted: bool,
) -> AttemptEnd {
    AttemptEnd::Failed {
        verdict,
        kind,
        detail,
        response: None,
        restated_from: None,
        self_inflicted,
    }
}

/// One upstream attempt against one candidate, judged before anything reaches the client.
async fn attempt(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    cand: Candidate,
    watch: &mut ClientWatch<'_>,
    wr: &mut TcpOwnedWriteHalf,
    budget: &Budget,
) -> AttemptEnd {
    let core = ctx.core;
    let cfg = core.config();
    let s = &cfg.resilience;
    let Some((provider, conn)) = cfg.connection(cand.connection) else {
        return failed(
            classify::transport(false),
            "protocol_error",
            "unknown connection".into(),
            true,
        );
    };
    let provider_index = cfg.provider_of(cand.connection).unwrap_or(0);
    let target = &entry.targets[cand.target];
    let body = match (&ctx.model, &ctx.model_span) {
        (Some(m), Some(span)) if *m != target.model => {
            crate::dialect::facts::rewrite_model(&ctx.body, span, &target.model)
        }
        _ => ctx.body.clone(),
    };
    let out = super::outbound::build(
        ctx.head,
        ctx.endpoint,
        provider,
        conn,
        &body,
        &ctx.request_id,
    );
    let budget_left = budget.time_left(now());
    let exec_left = ctx.exec_deadline.map_or(u64::MAX, |d| {
        d.saturating_duration_since(Instant::now()).as_millis() as u64
    });
    let left_ms = budget_left.min(exec_left);
    let deadline = Instant::now() + Duration::from_millis(left_ms);
    // A timeout caused by the client's own deadline says nothing about the upstream.
    let cut_by_deadline = left_ms < cfg.upstream.first_byte_timeout_ms;
    // When the execution budget (flow control) is what cut a wait, not the request's deadline
    // nor the upstream's own timeouts.
    let cut_by_execution = exec_left < budget_left;
    let head_cut_by_execution = exec_left < budget_left.min(cfg.upstream.first_byte_timeout_ms);
    let timeout_kind = |timeout: bool, kind: &'static str| {
        let binding = if kind == "timeout" {
            head_cut_by_execution
        } else {
            cut_by_execution
        };
        if timeout && binding {
            "execution_timeout"
        } else {
            kind
        }
    };
    let first_byte = Duration::from_millis(cfg.upstream.first_byte_timeout_ms.min(left_ms));
    let mut fresh_retry_used = false;
    let sent_at = Instant::now();
    let (mut up, head) = loop {
        let pooled = core.pool.borrow_mut().take(provider_index, now());
        let mut up = match pooled {
            Some(c) => c,
            None => {
                let connect = monoio::time::timeout(
                    deadline.saturating_duration_since(Instant::now()),
                    core.connector.connect(&provider.endpoint),
                );
                match watch.race(connect).await {
                    Raced::ClientGone => return AttemptEnd::ClientGone,
                    Raced::Done(Err(_)) => {
                        return failed(
                            classify::transport(true),
                            timeout_kind(true, "connect_timeout"),
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
    };
    if (200..300).contains(&head.status) {
        let st = &cfg.stream;
        if is_sse && st.guard && st.holdback_ms > 0 {
            match judge::hold_stream(&mut up, &head, st, deadline, watch).await {
                Read::ClientGone => return AttemptEnd::ClientGone,
                Read::Failed { detail, timeout } => {
                    return failed(
                        classify::transport(timeout),
                        timeout_kind(timeout, "stream_error"),
                        detail,
                        timeout && cut_by_deadline,
                    );
                }
                Read::Ok(Hold::Stalled) => {
                    // Nothing useful in time: retried elsewhere; says nothing certain about the
                    // key (a slow-thinking model), so nothing is cooled.
                    return failed(
                        classify::transport(true),
                        "stream_readiness_timeout",
                        format!(
                            "no useful stream event within {} ms",
                            st.readiness_timeout_ms
                        ),
                        true,
                    );
                }
                Read::Ok(Hold::Error(text)) => {
                    let (verdict, restated) = judge::judge(
                        s,
                        &provider.id,
                        200,
                        &head,
                        text.as_bytes(),
                        crate::clock::unix_ms(),
                    );
                    return AttemptEnd::Failed {
                        kind: "stream_error",
                        detail: format!("in-band stream error: {}", clean(&text, conn)),
                        restated_from: restated.map(|r| r.from),
                        response: None,
                        verdict,
                        self_inflicted: false,
                    };
                }
                Read::Ok(Hold::Commit) => {}
            }
        }
        core.loads
            .borrow_mut()
            .observe_latency(cand.connection, sent_at.elapsed().as_millis() as u64);
        core.record_success(site);
        return commit(ctx, entry, cand, provider_index, up, head, wr, watch).await;
    }
    match judge::read_error_body(&mut up, &head, deadline, watch).await {
        Read::ClientGone => AttemptEnd::ClientGone,
        Read::Failed { detail, timeout } => failed(
            classify::transport(timeout),
            timeout_kind(timeout, "reset"),
            detail,
            timeout && cut_by_deadline,
        ),
        // Too large to judge: relay it as it comes.
        Read::Ok(None) => commit(ctx, entry, cand, provider_index, up, head, wr, watch).await,
        Read::Ok(Some((body, complete))) => {
            let (verdict, restated) = judge::judge(
                s,
                &provider.id,
                head.status,
                &head,
                &body,
                crate::clock::unix_ms(),
            );
            if complete && head.keep_alive && !core.drain.is_draining() {
                let _ = up.buf.split();
                core.pool.borrow_mut().put(provider_index, up, now());
            }
            let kind = match head.status {
                429 => "http_429",
                s if s >= 500 => "http_5xx",
                _ => "http_4xx",
            };
            AttemptEnd::Failed {
                kind,
                detail: format!(
                    "upstream {}: {}",
                    head.status,
                    clean(&String::from_utf8_lossy(&body), conn)
                ),
                restated_from: restated.as_ref().map(|r| r.from),
                response: Some(Box::new(Buffered {
                    status: verdict.status,
                    head,
                    body,
                })),
                verdict,
                self_inflicted: false,
            }
        }
    }
}

/// The first line of an upstream error, short, with the connection's key redacted.
fn clean(s: &str, conn: &crate::config::Connection) -> String {
    let line: String = s.lines().next().unwrap_or("").chars().take(300).collect();
    let red = super::answer::redact_secret(line.as_bytes(), conn.secret.expose().as_bytes());
    String::from_utf8_lossy(&red).into_owned()
}

enum HeadFail {
    ClientGone,
    Failed {
        timeout: bool,
        kind: &'static str,
        detail: String,
        nothing_received: bool,
    },
}

async fn send_and_await_head(
    up: &mut UpConn,
    out: &super::outbound::Outbound,
    first_byte: Duration,
    watch: &mut ClientWatch<'_>,
) -> Result<Head, HeadFail> {
    let fail = |timeout: bool, detail: String, nothing_received| HeadFail::Failed {
        timeout,
        kind: if timeout { "timeout" } else { "reset" },
        detail,
        nothing_received,
    };
    for part in [&out.head, &out.body] {
        if part.is_empty() {
            continue;
        }
        match watch.race(up.stream.write_all(part.clone())).await {
            Raced::ClientGone => return Err(HeadFail::ClientGone),
            Raced::Done((Err(e), _)) => return Err(fail(false, format!("send failed: {e}"), true)),
            Raced::Done((Ok(_), _)) => {}
        }
    }
    let deadline = Instant::now() + first_byte;
    let limits = HeadLimits {
        max_head_bytes: 64 * 1024,
        max_headers: crate::http::head::MAX_HEADERS_HARD,
    };
    loop {
        match parse_response(&up.buf, limits, false) {
            Ok(Some((head, used))) => {
                let _ = up.buf.split_to(used);
                if (100..200).contains(&head.status) {
                    continue; // interim response: wait for the real one
                }
                return Ok(head);
            }
            Ok(None) => {}
            Err(e) => {
                return Err(HeadFail::Failed {
                    timeout: false,
                    kind: "protocol_error",
                    detail: format!("bad response head: {}", e.message()),
                    nothing_received: false,
                });
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let received = !up.buf.is_empty();
        let read = monoio::time::timeout(left, read_more(&mut up.stream, &mut up.buf));
        match watch.race(read).await {
            Raced::ClientGone => return Err(HeadFail::ClientGone),
            Raced::Done(Err(_)) => {
                return Err(fail(true, "no response head in time".into(), !received));
            }
            Raced::Done(Ok(Err(e))) => {
                return Err(fail(false, format!("connection failed: {e}"), !received));
            }
            Raced::Done(Ok(Ok(0))) => {
                return Err(fail(
                    false,
                    "connection closed before the response head".into(),
                    !received,
                ));
            }
            Raced::Done(Ok(Ok(_))) => {}
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
