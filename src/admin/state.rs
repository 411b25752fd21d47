//! The admin replica of the resilience tables (a bus member like any core) and the ring of
//! recent decision records, with the endpoints that show and reset them.

use crate::audit::Record;
use crate::ids::ConnId;
use crate::resilience::breaker::BreakerState;
use crate::resilience::bus::drain;
use crate::resilience::cooldown::Terminal;
use crate::resilience::{Event, Tables};
use crate::state::core::Shared;
use crate::state::generation::Gen;
use crossbeam_channel::Receiver;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub struct AdminState {
    pub shared: Arc<Shared>,
    /// The generation this replica's tables are sized for (caught up in `sync`).
    generation: Arc<Gen>,
    tables: Tables,
    inbox: Receiver<Event>,
    /// This replica's bus member id.
    me: usize,
    transitions: super::transitions::Transitions,
    /// The last quarter hour of traffic (`GET /admin/stats`).
    pub history: super::history::History,
}

type Answer = (u16, Value);

fn not_found(what: &str) -> Answer {
    (
        404,
        json!({"error": {"message": format!("no {what}"), "type": "invalid_request_error", "code": "not_found"}}),
    )
}

fn query<'a>(q: Option<&'a str>, key: &str) -> Option<&'a str> {
    q?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then_some(v)
    })
}

impl AdminState {
    pub fn new(shared: Arc<Shared>, inbox: Receiver<Event>) -> Self {
        let generation = shared.current();
        let cfg = &generation.config;
        let mut tables = Tables::new(cfg.provider_slot_count(), cfg.slot_count());
        for (i, st) in shared.stored_terminals(&generation) {
            tables.conns[i] = st;
        }
        crate::saved::restore(shared.store, &generation, &mut tables);
        let mut transitions = super::transitions::Transitions::default();
        transitions.fit(&generation);
        AdminState {
            tables,
            transitions,
            history: Default::default(),
            generation,
            me: shared.bus.admin(),
            shared,
            inbox,
        }
    }

    /// Catch up with the cores (called on every admin request and on the admin tick).
    pub fn sync(&mut self) {
        if self.shared.newest.load(Ordering::Acquire) != self.generation.number {
            let g = self.shared.staged();
            let c = &g.config;
            let (slots, providers) = (c.slot_count(), c.provider_slot_count());
            self.tables
                .fit(providers, slots, &g.fresh_providers, &g.fresh_conns);
            self.transitions.fit(&g);
            self.generation = g;
        }
        let g = &self.generation;
        let s = &g.config.resilience;
        let (t, seen) = (&mut self.tables, &mut self.transitions);
        let now = crate::clock::now_ms();
        drain(&self.inbox, |ev| {
            let before = super::transitions::before(t, ev);
            t.apply(ev, s);
            seen.after(before, t, ev, g, now);
        });
    }

    /// Ask every core for decision records (they answer on their next tick) and merge.
    pub fn query_decisions(
        &self,
        id: Option<&str>,
        limit: usize,
    ) -> crossbeam_channel::Receiver<Vec<Record>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let ev = Event::DecisionQuery {
            id: id.map(Arc::from),
            limit,
            reply: tx,
        };
        self.shared.bus.broadcast(self.me, &ev);
        rx
    }

    fn conn_index(&self, provider: &str, conn: &str) -> Option<ConnId> {
        self.generation.conn_by_label(&format!("{provider}/{conn}"))
    }

    fn connections(&self) -> Answer {
        let now = crate::clock::now_ms();
        let list: Vec<Value> = self
            .generation
            .conn_labels
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| !p.is_empty())
            .map(|(i, (p, c))| {
                let i = ConnId::new(i);
                let st = &self.tables.conns[i];
                // Since start, every core together: attempts and those not ok.
                let attempts = (self.shared.metrics.iter())
                    .map(|m| m.connection_attempts(i))
                    .fold((0, 0), |(a, f), (x, y)| (a + x, f + y));
                let state = match st.terminal {
                    Some(Terminal::Banned) => "banned",
                    Some(Terminal::Expired) => "expired",
                    Some(Terminal::CreditsExhausted) => "credits_exhausted",
                    None if st.cooling(now) => "cooling",
                    None => "active",
                };
                json!({
                    "provider": p,
                    "connection": c,
                    "state": state,
                    "cooling_ms": st.cool_end().saturating_sub(now),
                    "backoff_level": st.level(),
                    "last_error": st.has_error().then(|| json!({
                        "reason": st.last.reason.map(|r| r.as_str()),
                        "status": st.last.status,
                        "ago_ms": now.saturating_sub(st.last.at),
                    })),
                    // Models this key does not serve for now (it still serves the rest).
                    "locked_models": self.tables.lockouts.active_on(i, now).map(|l| json!({
                        "model": &*l.key, "reason": l.reason, "remaining_ms": l.until - now,
                    })).collect::<Vec<_>>(),
                    "in_flight": self.shared.in_flight[i].load(Ordering::Relaxed),
                    "attempts": attempts.0,
                    "failed_attempts": attempts.1,
                    "epoch": st.epoch,
                    "usage_wall": super::usage_wall::view(
                        self.shared.usage_walls.get(i),
                        self.generation.config.connection(i).map(|(_, c)| c),
                    ),
                    "oauth": super::oauth::view(
                        self.shared.tokens.get(i),
                        self.generation.config.connection(i).map(|(_, c)| c),
                    ),
                })
            })
            .collect();
        (200, json!({"connections": list}))
    }

    fn reset_connection(&mut self, provider: &str, conn: &str) -> Answer {
        let Some(i) = self.conn_index(provider, conn) else {
            return not_found("such connection");
        };
        let was = self.tables.conns[i];
        // What the rate-limit headers taught goes too: the operator says the key is fine.
        if let Some(g) = self.shared.flow.gates.get(i.index()) {
            g.forget_learned();
        }
        let state = self.tables.conns[i].reset();
        // An operator's reset ends a usage wall's lane too.
        if let Some(w) = self.shared.usage_walls.get(i) {
            w.end(crate::clock::unix_ms());
        }
        let ev = Event::Conn { conn: i, state };
        let before = super::transitions::Before::Conn(i, was);
        let now = crate::clock::now_ms();
        (self.transitions).after(before, &self.tables, &ev, &self.generation, now);
        // The reset is durable: the terminal state is gone from the store too.
        self.shared
            .store
            .delete(Shared::terminal_key(&self.generation, i));
        self.shared.bus.broadcast(self.me, &ev);
        let cleared = self.tables.lockouts.clear(i, None);
        self.shared.bus.broadcast(
            self.me,
            &Event::LockClear {
                conn: i,
                model: None,
            },
        );
        (
            200,
            json!({"reset": format!("{provider}/{conn}"), "epoch": state.epoch, "lockouts_cleared": cleared}),
        )
    }

    fn model_cooldowns(&self) -> Answer {
        let now = crate::clock::now_ms();
        let list: Vec<Value> = self
            .tables
            .lockouts
            .active(now)
            .map(|l| {
                let (p, c) = self
                    .generation
                    .conn_labels
                    .get(l.conn.index())
                    .cloned()
                    .unwrap_or_default();
                json!({"provider": p, "connection": c, "model": &*l.key, "scope": l.scope,
                    "reason": l.reason, "remaining_ms": l.until - now, "failures": l.failures})
            })
            .collect();
        (200, json!({"model_cooldowns": list}))
    }

    fn clear_model_cooldown(&mut self, q: Option<&str>) -> Answer {
        let (Some(p), Some(c)) = (query(q, "provider"), query(q, "connection")) else {
            return (
                400,
                json!({"error": {"message": "provider and connection are required", "type": "invalid_request_error", "code": "missing_parameter"}}),
            );
        };
        let Some(i) = self.conn_index(p, c) else {
            return not_found("such connection");
        };
        let model = query(q, "model").filter(|m| !m.is_empty());
        let cleared = self.tables.lockouts.clear(i, model);
        self.shared.bus.broadcast(
            self.me,
            &Event::LockClear {
                conn: i,
                model: model.map(Arc::from),
            },
        );
        (200, json!({"cleared": cleared}))
    }

    fn breakers(&mut self) -> Answer {
        let now = crate::clock::now_ms();
        let s = &self.generation.config.resilience;
        let list: Vec<Value> = self
            .generation
            .config
            .providers
            .iter()
            .map(|p| {
                let i = p.slot;
                let pol = &s.providers[i];
                let b = &mut self.tables.breakers[i];
                b.refresh(now, &pol.breaker);
                let gate = s
                    .gate_enabled
                    .then(|| self.tables.gates[i].closed_for(now, &pol.gate));
                json!({"provider": p.id, "profile": pol.kind.as_str(), "state": b.state,
                    "failures": b.failures, "open_cycles": b.open_cycles,
                    "retry_after_ms": b.retry_after(now, &pol.breaker),
                    "thresholds": pol.breaker, "window_gate_closed_ms": gate})
            })
            .collect();
        (200, json!({"breakers": list}))
    }

    fn reset_breaker(&mut self, provider: &str) -> Answer {
        let Some(i) = self
            .generation
            .config
            .providers
            .iter()
            .find(|p| p.id == provider)
            .map(|p| p.slot)
        else {
            return not_found("such provider");
        };
        let ev = Event::BreakerReset { provider: i };
        let before = super::transitions::before(&self.tables, &ev);
        self.tables.breakers[i].reset();
        let now = crate::clock::now_ms();
        (self.transitions).after(before, &self.tables, &ev, &self.generation, now);
        self.shared.bus.broadcast(self.me, &ev);
        crate::resilience::breaker::release_probe(&self.shared.probes.0[i]);
        (200, json!({"reset": provider}))
    }

    /// Resilience gauges for `/metrics`, from this replica.
    pub fn metrics(&mut self) -> String {
        use std::fmt::Write;
        self.sync();
        let now = crate::clock::now_ms();
        let generation = self.generation.clone();
        let s = &generation.config.resilience;
        let mut out = String::new();
        out.push_str("# HELP ringside_connection_state Connection state (1 for the current one).\n# TYPE ringside_connection_state gauge\n");
        for (i, (p, c)) in generation.conn_labels.iter().enumerate() {
            if p.is_empty() {
                continue;
            }
            let st = &self.tables.conns[i];
            let state = match st.terminal {
                Some(Terminal::Banned) => "banned",
                Some(Terminal::Expired) => "expired",
                Some(Terminal::CreditsExhausted) => "credits_exhausted",
                None if st.cooling(now) => "cooling",
                None => "active",
            };
            let _ = writeln!(
                out,
                "ringside_connection_state{{provider=\"{p}\",connection=\"{c}\",state=\"{state}\"}} 1"
            );
        }
        out.push_str("# HELP ringside_breaker_state Provider breaker: 0 closed, 1 degraded, 2 open, 3 half-open.\n# TYPE ringside_breaker_state gauge\n");
        for p in &generation.config.providers {
            let i = p.slot;
            let b = &mut self.tables.breakers[i];
            b.refresh(now, &s.providers[i].breaker);
            let v = match b.state {
                BreakerState::Closed => 0,
                BreakerState::Degraded => 1,
                BreakerState::Open => 2,
                BreakerState::HalfOpen => 3,
            };
            let _ = writeln!(out, "ringside_breaker_state{{provider=\"{}\"}} {v}", p.id);
        }
        let _ = writeln!(
            out,
            "# HELP ringside_model_lockouts_active Model lockouts in force now.\n# TYPE ringside_model_lockouts_active gauge\nringside_model_lockouts_active {}",
            self.tables.lockouts.active(now).count()
        );
        self.transitions.render(&generation, &mut out);
        out
    }

    /// Route an admin API request; `None` if the path is not ours.
    pub fn handle(&mut self, method: &str, path: &str, q: Option<&str>) -> Option<Answer> {
        self.sync();
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        Some(match (method, parts.as_slice()) {
            ("GET", ["admin", "connections"]) => self.connections(),
            ("POST", ["admin", "connections", p, c, "reset"]) => self.reset_connection(p, c),
            ("GET", ["admin", "model-cooldowns"]) => self.model_cooldowns(),
            ("DELETE", ["admin", "model-cooldowns"]) => self.clear_model_cooldown(q),
            ("GET", ["admin", "breakers"]) => self.breakers(),
            ("POST", ["admin", "breakers", p, "reset"]) => self.reset_breaker(p),
            _ => return None,
        })
    }
}
