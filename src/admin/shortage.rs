//! Telling the operator that Ringside ran short of descriptors or ports (`fd_limit`), or
//! refused client connections at accept (`state::conn_caps`), without a line per socket.

/// The operational event for sockets that found no descriptor, port or buffer: the first at
/// once, then at most one line per 10 s (100 admin ticks) with the sockets since the last; the
/// limit in force says what to raise.
#[derive(Default)]
pub(super) struct ShortageLog(Paced);

/// A count said the first time it moves, then at most once every 100 ticks.
#[derive(Default)]
struct Paced {
    /// The count when last said.
    said: u64,
    /// The tick it was last said at.
    said_at: Option<u64>,
}

impl ShortageLog {
    pub(super) fn tick(&mut self, ticks: u64) {
        let Some(sockets) = self.0.due(crate::fd_limit::exhaustions(), ticks) else {
            return;
        };
        let limit = crate::fd_limit::current().map(|(soft, _)| soft);
        crate::log::event(
            "warn",
            "out of file descriptors or local ports: sockets not made or accepted, idle upstream connections closed, no key or provider blamed",
            serde_json::json!({"sockets": sockets, "open_file_limit": limit}),
        );
    }
}

/// The operational event for client connections closed at accept: the first at once, then at
/// most one line per 10 s with the count since the last, by the setting that refused them,
/// the caps in force (by default they follow the descriptors a stream takes, so the line says
/// what they were) and the last address refused.
#[derive(Default)]
pub(super) struct RefusedLog {
    paced: Paced,
    by_reason: [u64; 3],
}

impl RefusedLog {
    pub(super) fn tick(&mut self, ticks: u64, shared: &crate::state::core::Shared) {
        use crate::state::conn_caps::{REFUSED, Refused};
        use std::sync::atomic::Ordering::Relaxed;
        let Some(refused) = self.paced.due(REFUSED.total(), ticks) else {
            return;
        };
        let mut by_reason = serde_json::Map::new();
        for why in Refused::ALL {
            let now = REFUSED.by_reason[why as usize].load(Relaxed);
            let since = now - self.by_reason[why as usize];
            self.by_reason[why as usize] = now;
            if since > 0 {
                by_reason.insert(why.as_str().into(), since.into());
            }
        }
        let (cap, per_address) = shared.caps_in_force();
        crate::log::event(
            "warn",
            "client connections refused at accept: a cap was reached (raise it, or find the client holding them)",
            serde_json::json!({"refused": refused, "by_setting": by_reason,
                               "max_connections_now": cap, "per_address_now": per_address,
                               "last_address": REFUSED.last_address().map(|a| a.to_string())}),
        );
    }
}

impl Paced {
    /// The sockets to tell of now, given the count since start: none while nothing new
    /// happened, or within 100 ticks of the last line.
    fn due(&mut self, count: u64, ticks: u64) -> Option<u64> {
        if count == self.said || self.said_at.is_some_and(|t| ticks < t + 100) {
            return None;
        }
        let sockets = count - self.said;
        (self.said, self.said_at) = (count, Some(ticks));
        Some(sockets)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shortage_is_said_at_once_then_at_most_every_hundred_ticks() {
        let mut log = super::Paced::default();
        assert_eq!(log.due(0, 1), None, "nothing happened");
        assert_eq!(log.due(3, 2), Some(3), "the first, at once");
        assert_eq!(log.due(50, 3), None);
        assert_eq!(log.due(90, 101), None);
        assert_eq!(log.due(90, 102), Some(87), "everything since the last line");
        assert_eq!(log.due(90, 300), None, "nothing new");
        assert_eq!(log.due(91, 301), Some(1));
    }
}
