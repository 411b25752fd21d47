//! What a synthetic probe should ask about, and what its answer means (the prober that sends
//! it is `proxy::prober`). A provider is worth probing while its breaker is open or one of its
//! keys cools for the provider's own trouble (a 5xx, an overload, a timeout, a refused
//! connection): one answer from the provider then ends what a timer would otherwise hold.

use super::breaker::BreakerState;
use super::cooldown::Trouble;
use super::{Event, Settings, Tables};
use crate::ids::ConnId;

/// What a probe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// The provider answered (not with a 5xx); `key_ok`: and it took the probing key (no
    /// 401/403), which may serve again.
    Up { key_ok: bool },
    /// A 5xx, a timeout, or no connection: nothing changes (the timers still run).
    Down,
}

impl ProbeAnswer {
    /// The answer to a probe that got an HTTP status.
    pub fn of_status(status: u16) -> ProbeAnswer {
        match status {
            500.. => ProbeAnswer::Down,
            401 | 403 => ProbeAnswer::Up { key_ok: false },
            _ => ProbeAnswer::Up { key_ok: true },
        }
    }
}

/// Why a provider is probed now, with the probe's spacing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeNeed {
    /// The keys to ask with, in turn: while the breaker is open, those not cooling at all;
    /// otherwise (or when every key cools) those cooling for the provider's trouble that a
    /// probe may lift (`ConnState::probe_may_lift`); every live key when there are none.
    pub keys: Vec<ConnId>,
    /// How long after this probe the next one may go.
    pub every_ms: u64,
}

impl Tables {
    /// Whether the provider in `slot` needs a probe now; `None` when nothing is waiting on the
    /// provider, or probes are off for it.
    pub fn probe_need(&mut self, s: &Settings, slot: usize, now: u64) -> Option<ProbeNeed> {
        let profile = &s.providers.get(slot)?.breaker;
        let keys = s.provider_conns.get(slot)?;
        if profile.probe_interval_ms == 0 {
            return None;
        }
        let breaker = self.breakers.get_mut(slot)?;
        breaker.refresh(now, profile);
        let open = breaker.state == BreakerState::Open;
        let every_ms = if open {
            breaker.probe_every(profile)?
        } else {
            profile.probe_interval_ms
        };
        let live = |c: &&ConnId| {
            self.conns
                .get(c.index())
                .is_some_and(|st| st.terminal.is_none())
        };
        let trouble = self.trouble(s, slot, now);
        let troubled: Vec<ConnId> = keys
            .iter()
            .filter(live)
            .filter(|c| {
                let st = &self.conns[c.index()];
                st.cooling(now)
                    && st.probe_may_lift(trouble)
                    && st.probe_due(profile.probe_interval_ms) <= now
            })
            .copied()
            .collect();
        let keys: Vec<ConnId> = if open {
            // The question is whether the provider answers, and a key not cooling answers it
            // without its own trouble in the way: one whose answers keep failing (one
            // deployment overloaded, one account's relay down; its model list failing or
            // hanging too) must not hold the breaker open while its siblings would answer. The
            // cooling keys are asked when every key cools; the others' timers run.
            let idle: Vec<ConnId> = keys
                .iter()
                .filter(live)
                .filter(|c| !self.conns[c.index()].cooling(now))
                .copied()
                .collect();
            if !idle.is_empty() {
                idle
            } else if !troubled.is_empty() {
                troubled
            } else {
                keys.iter().filter(live).copied().collect()
            }
        } else if !troubled.is_empty() {
            troubled
        } else {
            return None;
        };
        (!keys.is_empty()).then_some(ProbeNeed { keys, every_ms })
    }

    /// How widely the provider in `slot` is in trouble now (`ConnState::probe_may_lift`).
    pub fn trouble(&self, s: &Settings, slot: usize, now: u64) -> Trouble {
        let breaker_open = self
            .breakers
            .get(slot)
            .is_some_and(|b| b.state == BreakerState::Open);
        let mut live = s
            .provider_conns
            .get(slot)
            .map_or(&[][..], |k| &k[..])
            .iter()
            .filter_map(|c| self.conns.get(c.index()))
            .filter(|st| st.terminal.is_none())
            .peekable();
        let every_key_down = live.peek().is_some() && live.all(|st| st.down_before_first_byte(now));
        Trouble {
            breaker_open,
            every_key_down,
        }
    }

    /// Apply a probe's answer for `conn` of the provider in `slot`; each resulting event goes
    /// to `emit` (for the other cores).
    pub fn on_probe(
        &mut self,
        s: &Settings,
        slot: usize,
        conn: ConnId,
        answer: ProbeAnswer,
        now: u64,
        emit: &mut dyn FnMut(Event),
    ) {
        let ProbeAnswer::Up { key_ok } = answer else {
            return;
        };
        let trouble = self.trouble(s, slot, now);
        if let (Some(b), Some(p)) = (self.breakers.get_mut(slot), s.providers.get(slot)) {
            b.refresh(now, &p.breaker);
            if b.state == BreakerState::Open {
                b.on_probe_ok(now, &p.breaker);
                emit(Event::BreakerProbeOk {
                    provider: slot,
                    at: now,
                });
            }
        }
        if key_ok
            && let Some(st) = self.conns.get_mut(conn.index())
            && st.probe_may_lift(trouble)
            && let Some(state) = st.on_probe_ok(now)
        {
            emit(Event::Conn { conn, state });
        }
    }
}

#[cfg(test)]
mod tests;
