//! When an event stream earns a standing poll: once it has been waiting on its upstream for
//! [`EARNED_AFTER_MS`] since its first wait. Before that, each wait is a one-shot poll through
//! the runtime's ring, as for any other read.
//!
//! Why: a standing poll costs two submissions of its own (arm and cancel, each a system call on
//! the core's second ring) and a turn of the reaper for its completions. A held stream, which
//! waits for each of its events, pays that back within a few events; a stream that comes in one
//! burst (a short answer, a tool call, a cached reply) waits a few times in a few milliseconds
//! and never does. Short 20-event streams spent 5–6 % less CPU each with one worker, 2–8 % with
//! two, once they took no standing poll (2026-12-07, docs/design/performance.md); a held
//! stream makes one or two one-shot waits before its poll stands, and spent the same. Time,
//! not a count of waits, tells the two apart: a burst may wait as often as a held stream's
//! first events do.

use std::cell::RefCell;
use std::os::fd::RawFd;

/// How long a stream waits, from its first wait, before its waits go through a standing poll.
pub const EARNED_AFTER_MS: u64 = 20;

thread_local! {
    /// By descriptor: the core's clock at which the stream earns its poll (its first wait plus
    /// [`EARNED_AFTER_MS`]), plus one (0: no wait yet). Plain data of the core, as the standing
    /// polls' own table.
    static EARNS_AT: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Whether `fd`'s stream, waiting now, has waited long enough for a standing poll (never on
/// the epoll driver, which has none); a stream's first wait is marked here.
pub fn earned(fd: RawFd) -> bool {
    !monoio::utils::is_legacy() && mark(fd, crate::clock::now_ms())
}

/// [`earned`] at `now_ms`.
fn mark(fd: RawFd, now_ms: u64) -> bool {
    let Ok(i) = usize::try_from(fd) else {
        return false;
    };
    EARNS_AT.with_borrow_mut(|marks| {
        if marks.len() <= i {
            marks.resize(i + 1, 0);
        }
        let (mark, earned) = rule(marks[i], now_ms);
        marks[i] = mark;
        earned
    })
}

/// `fd`'s stream is over: its successor on the descriptor starts afresh.
pub fn forget(fd: RawFd) {
    let Ok(i) = usize::try_from(fd) else {
        return;
    };
    let _ = EARNS_AT.try_with(|marks| {
        if let Ok(mut marks) = marks.try_borrow_mut()
            && let Some(mark) = marks.get_mut(i)
        {
            *mark = 0;
        }
    });
}

/// Tests: `fd`'s stream has been waiting since long ago, so its next wait earns a poll.
#[cfg(test)]
pub fn waited_long(fd: RawFd) {
    let _ = mark(fd, 0); // (the table now has room for `fd`)
    EARNS_AT.with_borrow_mut(|marks| marks[fd as usize] = 1);
}

/// The mark to keep and whether the stream has earned its poll, from the mark kept so far.
fn rule(mark: u64, now_ms: u64) -> (u64, bool) {
    if mark == 0 {
        return (now_ms.saturating_add(EARNED_AFTER_MS + 1), false);
    }
    (mark, now_ms >= mark - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_earns_its_poll_once_it_has_waited_long_enough_since_its_first_wait() {
        // The first wait marks the stream, at any clock reading (0 included).
        let (mark, earned) = rule(0, 0);
        assert!(!earned);
        assert_eq!(mark, EARNED_AFTER_MS + 1);
        // A burst: more waits within the window earn nothing, and the mark stays.
        assert_eq!(rule(mark, EARNED_AFTER_MS - 1), (mark, false));
        // A wait that starts the window's length after the first one earns it.
        assert_eq!(rule(mark, EARNED_AFTER_MS), (mark, true));
        assert_eq!(rule(mark, 5_000), (mark, true));
        // A clock that reads earlier than the first wait (it never does) earns nothing.
        let (late, _) = rule(0, 100);
        assert_eq!(rule(late, 50), (late, false));
        // A stream marked as waiting since the clock's start earns at once.
        assert_eq!(rule(1, 0), (1, true));
    }

    #[test]
    fn a_descriptor_s_next_stream_starts_afresh() {
        let fd = 7;
        assert!(!mark(fd, 1_000), "first wait");
        assert!(mark(fd, 1_000 + EARNED_AFTER_MS));
        forget(fd);
        assert!(
            !mark(fd, 1_000 + 2 * EARNED_AFTER_MS),
            "a new stream's first wait"
        );
        assert!(!mark(-1, 0), "no descriptor, no poll");
        forget(-1);
    }
}
