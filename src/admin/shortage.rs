//! Telling the operator that Ringside ran short of descriptors or ports (`fd_limit`), without
//! a line per refused socket.

/// The operational event for sockets that found no descriptor, port or buffer: the first at
/// once, then at most one line per 10 s (100 admin ticks) with the sockets since the last; the
/// limit in force says what to raise.
#[derive(Default)]
pub(super) struct ShortageLog {
    /// `fd_limit::exhaustions()` when last said.
    said: u64,
    /// The tick it was last said at.
    said_at: Option<u64>,
}

impl ShortageLog {
    pub(super) fn tick(&mut self, ticks: u64) {
        let Some(sockets) = self.due(crate::fd_limit::exhaustions(), ticks) else {
            return;
        };
        let limit = crate::fd_limit::current().map(|(soft, _)| soft);
        crate::log::event(
            "warn",
            "out of file descriptors or local ports: sockets not made or accepted, idle upstream connections closed, no key or provider blamed",
            serde_json::json!({"sockets": sockets, "open_file_limit": limit}),
        );
    }

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
        let mut log = super::ShortageLog::default();
        assert_eq!(log.due(0, 1), None, "nothing happened");
        assert_eq!(log.due(3, 2), Some(3), "the first, at once");
        assert_eq!(log.due(50, 3), None);
        assert_eq!(log.due(90, 101), None);
        assert_eq!(log.due(90, 102), Some(87), "everything since the last line");
        assert_eq!(log.due(90, 300), None, "nothing new");
        assert_eq!(log.due(91, 301), Some(1));
    }
}
