//! The cap on client connections when `max_connections` is left at 0: what the open-file
//! limit allows, counting what a client's stream takes of it. Over HTTP/1.1 a stream holds two
//! descriptors (the client's and its own upstream connection's); over HTTP/2 one (the
//! upstream connection is shared by up to a hundred streams). A fixed half, as before HTTP/2,
//! would refuse half the streams an HTTP/2 provider could carry; a cap that ignored HTTP/1.1
//! would admit clients whose upstream sockets then fail for want of a descriptor. So the cap
//! is two descriptors a client while any provider may be reached over HTTP/1.1, one otherwise,
//! read from atomics the cores keep (no lock at accept).

use crate::metrics::CoreMetrics;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// What caps the client connections held at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    /// `max_connections`, as set.
    Set(usize),
    /// `max_connections = 0`: what these descriptors leave (`fd_limit::connections_budget`)
    /// once upstream connections are counted ([`clients_allowed`]).
    Descriptors(usize),
}

/// What the upstream side holds, for the cap by descriptors: HTTP/2 connections open (each a
/// descriptor shared by its streams), and whether a client's stream may need an HTTP/1.1
/// connection of its own (a provider set to HTTP/1.1 or found speaking it).
#[derive(Clone, Copy, Debug, Default)]
pub struct UpstreamUse {
    pub h2_connections: usize,
    pub http1: bool,
}

/// How many clients `budget` descriptors hold beside the upstream's. While a client's stream
/// may take an HTTP/1.1 connection, two descriptors per client, as before HTTP/2; else one,
/// beside the HTTP/2 connections and a sixty-fourth kept for side connections (token
/// refreshes, the fleet's Redis, telemetry) and a burst's lag (the counts are a second old).
pub fn clients_allowed(budget: usize, up: UpstreamUse) -> usize {
    let room = budget.saturating_sub(up.h2_connections);
    let clients = if up.http1 {
        room / 2
    } else {
        room.saturating_sub(budget / 64)
    };
    clients.max(1)
}

/// What the upstream side holds now: the cores' HTTP/2 connections, and whether a stream may
/// take an HTTP/1.1 connection (a provider set so, `http1_by_config`, or found speaking it on
/// a core). As of each core's last count (a second at most; a provider found speaking HTTP/1.1
/// is told at once).
pub fn upstream_use(cores: &[Arc<CoreMetrics>], http1_by_config: bool) -> UpstreamUse {
    let h2 = cores.iter().map(|m| &m.h2);
    let h2_connections: u64 = h2.clone().map(|h| h.open[0].load(Relaxed)).sum();
    let found = h2.clone().any(|h| h.http1.load(Relaxed));
    UpstreamUse {
        h2_connections: usize::try_from(h2_connections).unwrap_or(usize::MAX),
        http1: http1_by_config || found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_takes_two_while_a_stream_may_take_an_http1_connection() {
        let http1 = UpstreamUse {
            h2_connections: 0,
            http1: true,
        };
        // 20,000 descriptors less the reserve: as before HTTP/2, two per client.
        assert_eq!(clients_allowed(19_936, http1), 9_968);
        // Every provider over HTTP/2: one each, beside its connections and a sixty-fourth.
        let h2 = |n| UpstreamUse {
            h2_connections: n,
            http1: false,
        };
        assert_eq!(clients_allowed(19_936, h2(0)), 19_625);
        assert_eq!(clients_allowed(19_936, h2(165)), 19_460);
        // A mixed fleet is counted as HTTP/1.1, its HTTP/2 connections first.
        let mixed = UpstreamUse {
            h2_connections: 36,
            http1: true,
        };
        assert_eq!(clients_allowed(19_936, mixed), 9_950);
        assert_eq!(clients_allowed(10, h2(50)), 1, "never none");
    }

    #[test]
    fn the_cores_counts_and_marks_are_summed() {
        let cores: Vec<_> = (0..2).map(|_| Arc::new(CoreMetrics::new(4, 4))).collect();
        cores[0].h2.open[0].store(3, Relaxed);
        cores[1].h2.open[0].store(4, Relaxed);
        let up = upstream_use(&cores, false);
        assert_eq!((up.h2_connections, up.http1), (7, false));
        assert!(upstream_use(&cores, true).http1, "set by the config");
        cores[1].h2.http1.store(true, Relaxed);
        assert!(upstream_use(&cores, false).http1, "found on a core");
    }
}
