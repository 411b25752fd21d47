//! What changed, as the admin replica applies the cores' events: a connection starting to cool
//! or ending (banned, expired, out of credits), an operator reset, a breaker opening or closing,
//! a model lockout starting. Each is counted (a short cooldown between two scrapes still shows
//! in `ringside_connection_transitions_total`) and logged as an operational event.

use crate::ids::ConnId;
use crate::resilience::breaker::BreakerState;
use crate::resilience::cooldown::{ConnState, Terminal};
use crate::resilience::{Event, Tables};
use crate::state::generation::Gen;
use serde_json::json;
use std::fmt::Write;

/// Where a connection went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnTo {
    Cooling,
    Banned,
    Expired,
    CreditsExhausted,
    Reset,
}

const CONN_TO: [ConnTo; 5] = [
    ConnTo::Cooling,
    ConnTo::Banned,
    ConnTo::Expired,
    ConnTo::CreditsExhausted,
    ConnTo::Reset,
];

impl ConnTo {
    fn as_str(self) -> &'static str {
        match self {
            ConnTo::Cooling => "cooling",
            ConnTo::Banned => "banned",
            ConnTo::Expired => "expired",
            ConnTo::CreditsExhausted => "credits_exhausted",
            ConnTo::Reset => "reset",
        }
    }
}

/// The part of the tables one event may change, before it is applied.
pub(super) enum Before {
    Conn(ConnId, ConnState),
    Breaker(usize, BreakerState, u64),
    Lock(ConnId, Option<u64>),
    Nothing,
}

/// Counts per connection slot and per provider slot.
#[derive(Default)]
pub(super) struct Transitions {
    conns: Vec<[u64; CONN_TO.len()]>,
    /// Opened, closed.
    breakers: Vec<[u64; 2]>,
    lockouts: Vec<u64>,
}

pub(super) fn before(t: &Tables, ev: &Event) -> Before {
    match ev {
        Event::Conn { conn, .. } => t
            .conns
            .get(conn.index())
            .map_or(Before::Nothing, |s| Before::Conn(*conn, *s)),
        Event::BreakerFailure { provider, .. }
        | Event::BreakerSuccess { provider, .. }
        | Event::BreakerReset { provider } => {
            t.breakers.get(*provider).map_or(Before::Nothing, |b| {
                Before::Breaker(*provider, b.state, b.opened_at)
            })
        }
        Event::Lock(l) => Before::Lock(l.conn, t.lockouts.until_of(l)),
        _ => Before::Nothing,
    }
}

impl Transitions {
    /// A slot handed to a new connection or provider by a reload starts from zero.
    pub(super) fn fit(&mut self, g: &Gen) {
        let (conns, providers) = (g.config.slot_count(), g.config.provider_slot_count());
        self.conns
            .resize(conns.max(self.conns.len()), [0; CONN_TO.len()]);
        self.lockouts.resize(conns.max(self.lockouts.len()), 0);
        self.breakers
            .resize(providers.max(self.breakers.len()), [0; 2]);
        for &c in &g.fresh_conns {
            if let (Some(c), Some(l)) = (
                self.conns.get_mut(c.index()),
                self.lockouts.get_mut(c.index()),
            ) {
                (*c, *l) = ([0; CONN_TO.len()], 0);
            }
        }
        for &i in &g.fresh_providers {
            if let Some(b) = self.breakers.get_mut(i) {
                *b = [0; 2];
            }
        }
    }

    /// Compare with what the event changed; count and log a transition.
    pub(super) fn after(&mut self, before: Before, t: &Tables, ev: &Event, g: &Gen, now: u64) {
        match before {
            Before::Conn(i, was) => {
                let Some(to) = t
                    .conns
                    .get(i.index())
                    .and_then(|now_st| conn_to(&was, now_st, now))
                else {
                    return;
                };
                if let Some(c) = self.conns.get_mut(i.index()) {
                    c[to as usize] += 1;
                }
                log_conn(g, i, to, &t.conns[i], now);
            }
            Before::Breaker(p, was, opened_at) => {
                let Some(b) = t.breakers.get(p) else { return };
                let (opened, closed) = (
                    b.state == BreakerState::Open && b.opened_at != opened_at,
                    b.state == BreakerState::Closed
                        && matches!(was, BreakerState::Open | BreakerState::HalfOpen),
                );
                if !(opened || closed) {
                    return;
                }
                if let Some(c) = self.breakers.get_mut(p) {
                    c[usize::from(closed)] += 1;
                }
                let provider = provider_id(g, p);
                let (level, msg) = if opened {
                    ("warn", "breaker opened")
                } else {
                    ("info", "breaker closed")
                };
                let reset = matches!(ev, Event::BreakerReset { .. });
                crate::log::event(
                    level,
                    msg,
                    json!({"provider": provider, "failures": b.failures, "by_operator": reset}),
                );
            }
            Before::Lock(i, was) => {
                let Event::Lock(l) = ev else { return };
                let fresh = was.is_none_or(|until| until <= now) && l.until > now;
                if !fresh {
                    return;
                }
                if let Some(c) = self.lockouts.get_mut(i.index()) {
                    *c += 1;
                }
                let (p, c) = g.conn_labels.get(i.index()).cloned().unwrap_or_default();
                // A rate limit's short lock is as routine as a connection's cooldown.
                let level = if l.reason.waitable() { "info" } else { "warn" };
                crate::log::event(
                    level,
                    "model locked out",
                    json!({"provider": p, "connection": c, "model": &*l.key,
                        "reason": l.reason.as_str(), "for_ms": l.until - now}),
                );
            }
            Before::Nothing => {}
        }
    }

    pub(super) fn render(&self, g: &Gen, out: &mut String) {
        out.push_str("# HELP ringside_connection_transitions_total Connections entering a state: cooling (a cooldown started), banned, expired, credits_exhausted, reset (by an operator).\n# TYPE ringside_connection_transitions_total counter\n");
        let e = crate::metrics::escape;
        for (i, (p, c)) in g.conn_labels.iter().enumerate() {
            let Some(counts) = self.conns.get(i).filter(|_| !p.is_empty()) else {
                continue;
            };
            for to in CONN_TO {
                let _ = writeln!(
                    out,
                    "ringside_connection_transitions_total{{provider=\"{}\",connection=\"{}\",to=\"{}\"}} {}",
                    e(p),
                    e(c),
                    to.as_str(),
                    counts[to as usize]
                );
            }
        }
        out.push_str("# HELP ringside_model_lockouts_total Model lockouts started, per connection.\n# TYPE ringside_model_lockouts_total counter\n");
        for (i, (p, c)) in g.conn_labels.iter().enumerate() {
            if let Some(n) = self.lockouts.get(i).filter(|_| !p.is_empty()) {
                let _ = writeln!(
                    out,
                    "ringside_model_lockouts_total{{provider=\"{}\",connection=\"{}\"}} {n}",
                    e(p),
                    e(c)
                );
            }
        }
        out.push_str("# HELP ringside_breaker_transitions_total Provider breakers opening and closing.\n# TYPE ringside_breaker_transitions_total counter\n");
        for p in &g.config.providers {
            let counts = self.breakers.get(p.slot).copied().unwrap_or_default();
            for (k, to) in ["open", "closed"].iter().enumerate() {
                let _ = writeln!(
                    out,
                    "ringside_breaker_transitions_total{{provider=\"{}\",to=\"{to}\"}} {}",
                    e(&p.id),
                    counts[k]
                );
            }
        }
    }
}

/// What a connection's new state means, if it is a transition worth counting.
fn conn_to(was: &ConnState, now_st: &ConnState, now: u64) -> Option<ConnTo> {
    if now_st.epoch > was.epoch {
        return Some(ConnTo::Reset);
    }
    if was.terminal.is_none() {
        match now_st.terminal {
            Some(Terminal::Banned) => return Some(ConnTo::Banned),
            Some(Terminal::Expired) => return Some(ConnTo::Expired),
            Some(Terminal::CreditsExhausted) => return Some(ConnTo::CreditsExhausted),
            None => {}
        }
    }
    (now_st.terminal.is_none() && !was.cooling(now) && now_st.cooling(now))
        .then_some(ConnTo::Cooling)
}

fn provider_id(g: &Gen, slot: usize) -> String {
    (g.config.providers.iter())
        .find(|p| p.slot == slot)
        .map(|p| p.id.clone())
        .unwrap_or_default()
}

fn log_conn(g: &Gen, i: ConnId, to: ConnTo, st: &ConnState, now: u64) {
    let (p, c) = g.conn_labels.get(i.index()).cloned().unwrap_or_default();
    let reason = st.last.reason.map(|r| r.as_str());
    let (level, msg) = match to {
        ConnTo::Cooling => ("info", "connection cooling"),
        ConnTo::Banned => ("error", "connection banned"),
        ConnTo::Expired => ("error", "connection expired"),
        ConnTo::CreditsExhausted => ("error", "connection out of credits"),
        ConnTo::Reset => ("info", "connection reset by an operator"),
    };
    crate::log::event(
        level,
        msg,
        json!({"provider": p, "connection": c, "reason": reason, "status": st.last.status,
            "for_ms": st.cool_end().saturating_sub(now)}),
    );
}
