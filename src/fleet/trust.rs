//! The reading side of the fleet's trust (`signed`): each thread that reads from Redis opens
//! what it reads with the fleet's key, refuses replays, and has what survives checked by the
//! same rules as local input. Whatever is refused is counted
//! (`ringside_fleet_refused_total{reason}`), said in a warn line (the first at once, then at
//! most one every 10 s with the count since), and ignored.

use super::signed::{FleetKey, Opened, Refused, Replays};
use crate::state::core::Shared;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// When the last warn line was said (Unix ms), and the refusals counted then.
static SAID_AT: AtomicU64 = AtomicU64::new(0);
static SAID_COUNT: AtomicU64 = AtomicU64::new(0);
const SAY_EVERY_MS: u64 = 10_000;

/// One reading thread's view of the fleet's trust.
pub(super) struct Reader {
    key: FleetKey,
    replays: Replays,
    shared: Arc<Shared>,
}

impl Reader {
    pub(super) fn new(key: &FleetKey, shared: &Arc<Shared>) -> Reader {
        Reader {
            key: key.clone(),
            replays: Replays::default(),
            shared: shared.clone(),
        }
    }

    /// The body of a message published on `channel`, if a member sent it and it is new.
    pub(super) fn message<'a>(&mut self, channel: &str, text: &'a str) -> Option<&'a str> {
        let now = crate::clock::unix_ms();
        let checked = self
            .key
            .open(channel, text)
            .and_then(|m| self.replays.message(&m, now).map(|()| m));
        self.verdict(channel, checked)
    }

    /// The body of an entry kept at `place` (a key, or `key#field` in a hash), if a member
    /// wrote it and nothing newer was read there.
    pub(super) fn entry<'a>(&mut self, place: &str, text: &'a str) -> Option<&'a str> {
        let checked = self
            .key
            .open(place, text)
            .and_then(|e| self.replays.entry(place, &e).map(|()| e));
        self.verdict(place, checked)
    }

    fn verdict<'a>(&self, place: &str, checked: Result<Opened<'a>, Refused>) -> Option<&'a str> {
        match checked {
            Ok(o) => Some(o.body),
            Err(why) => {
                self.refused(place, why);
                None
            }
        }
    }

    /// Count and say a refusal: signed by a member, but failing the rules of local input.
    pub(super) fn invalid(&self, place: &str) {
        self.refused(place, Refused::Invalid);
    }

    fn refused(&self, place: &str, why: Refused) {
        refused(&self.shared, place, why);
    }
}

/// Count a refusal and say it, paced.
pub(super) fn refused(shared: &Shared, place: &str, why: Refused) {
    shared.fleet.refused[why.index()].fetch_add(1, Relaxed);
    let total: u64 = shared.fleet.refused.iter().map(|c| c.load(Relaxed)).sum();
    let now = crate::clock::unix_ms();
    let last = SAID_AT.load(Relaxed);
    if last != 0 && now.saturating_sub(last) < SAY_EVERY_MS {
        return;
    }
    if SAID_AT
        .compare_exchange(last, now, Relaxed, Relaxed)
        .is_err()
    {
        return; // another thread says it
    }
    let since = total - SAID_COUNT.swap(total, Relaxed);
    let place: String = place.chars().take(200).collect();
    crate::log::event(
        "warn",
        "fleet: ignored what Redis held that this fleet's members did not write (someone with Redis access but not the fleet secret, another fleet, or an old version)",
        serde_json::json!({"where": place, "reason": why.as_str(), "refused_since_last_line": since}),
    );
}
