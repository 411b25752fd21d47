//! The open-file limit, which bounds how many streams one process can hold: each proxied
//! stream takes two descriptors (the client's and the upstream's). Systems ship a low soft
//! limit (1,024) under a higher hard one; Ringside raises its own soft limit to the hard limit
//! at start, as nginx's `worker_rlimit_nofile` and HAProxy do, and `ringside check` says what
//! the limit allows.
//!
//! Running out anyway (descriptors held by idle pooled connections, refused clients, other
//! limits of the host) is Ringside's own shortage, not an upstream's failure: a connect or
//! accept that finds none is counted here ([`noted_exhaustion`]), blames no key or provider,
//! and makes every core close its idle upstream connections (`runtime::core`'s tick).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Times a socket could not be made or accepted for want of a local resource, since start.
static EXHAUSTED: AtomicU64 = AtomicU64::new(0);

/// Whether a socket error says this host is out of something of its own, not that the peer
/// failed: descriptors (the process's limit or the system's), socket buffers or memory, or a
/// free local port for a new connection.
pub fn is_exhaustion(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
    )
}

/// Whether `e` is such a shortage ([`is_exhaustion`]), counting it when it is.
pub fn noted_exhaustion(e: &std::io::Error) -> bool {
    let short = is_exhaustion(e);
    if short {
        EXHAUSTED.fetch_add(1, Relaxed);
    }
    short
}

/// How many times that happened since start (`ringside_local_resource_exhaustions_total`).
pub fn exhaustions() -> u64 {
    EXHAUSTED.load(Relaxed)
}

/// Descriptors kept aside for listeners, the store, the log, rings and DNS.
const RESERVED: u64 = 64;

/// The (soft, hard) limit on open files.
pub fn current() -> Option<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one plain struct we own.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    ok.then_some((r.rlim_cur, r.rlim_max))
}

/// Raise the soft limit to the hard one; the soft limit in force afterwards.
pub fn raise() -> Option<u64> {
    let (soft, hard) = current()?;
    if soft >= hard {
        return Some(soft);
    }
    let r = libc::rlimit {
        rlim_cur: hard,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one plain struct; raising the soft limit up to the hard one is
    // always permitted.
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0;
    Some(if ok { hard } else { soft })
}

/// How many proxied streams `limit` descriptors allow over HTTP/1.1 (two each).
pub fn streams_allowed(limit: u64) -> u64 {
    budget(limit) as u64 / 2
}

/// The descriptors `limit` leaves for client and upstream connections once the reserve is
/// kept.
pub fn budget(limit: u64) -> usize {
    limit.min(1 << 24).saturating_sub(RESERVED) as usize
}

/// [`budget`] under the soft limit in force (raised at start, [`raise`]).
pub fn connections_budget() -> usize {
    budget(current().map_or(1024, |(soft, _)| soft))
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_descriptors_per_stream_after_the_reserve() {
        assert_eq!(super::streams_allowed(20_000), 9_968);
        assert_eq!(super::streams_allowed(10), 0);
        let (soft, hard) = super::current().expect("a limit");
        assert!(soft <= hard);
    }

    #[test]
    fn only_a_shortage_of_this_host_counts_as_exhaustion() {
        use std::io::Error;
        for code in [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EADDRNOTAVAIL,
        ] {
            assert!(
                super::is_exhaustion(&Error::from_raw_os_error(code)),
                "{code}"
            );
        }
        // The peer's doing, or the network's: the upstream is judged as usual.
        for code in [
            libc::ECONNREFUSED,
            libc::ECONNRESET,
            libc::ETIMEDOUT,
            libc::EHOSTUNREACH,
            libc::ENETUNREACH,
        ] {
            assert!(
                !super::is_exhaustion(&Error::from_raw_os_error(code)),
                "{code}"
            );
        }
        assert!(!super::is_exhaustion(&Error::other("no errno")));
    }
}
