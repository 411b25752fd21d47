//! The open-file limit, which bounds how many streams one process can hold: each proxied
//! stream takes two descriptors (the client's and the upstream's). Systems ship a low soft
//! limit (1,024) under a higher hard one; Ringside raises its own soft limit to the hard limit
//! at start, as nginx's `worker_rlimit_nofile` and HAProxy do, and `ringside check` says what
//! the limit allows.

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

/// How many proxied streams `limit` descriptors allow.
pub fn streams_allowed(limit: u64) -> u64 {
    limit.saturating_sub(RESERVED) / 2
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
}
