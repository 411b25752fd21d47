//! The data port's cap on client connections, left at its default, follows what a stream takes
//! of the open-file limit (`state::conn_caps::Cap::Descriptors`): one descriptor where every
//! provider speaks HTTP/2 (the client's; its stream shares a connection), two while one may be
//! reached over HTTP/1.1 (by its settings, or found so by its handshake). The binary runs under
//! a limit of 400 descriptors: 336 once the reserve is kept, so 168 clients over HTTP/1.1 and
//! 331 over HTTP/2 (a sixty-fourth kept for side connections).

use super::h2::{count, metric_sum, sim_opts, streams_at_once};
use crate::both_drivers;
use crate::common::sim_tls::SimTls;
use crate::common::*;
use ringside::simulate::front::H2Faults;
use std::time::{Duration, Instant};

both_drivers!(
    over_http2_a_client_takes_one_descriptor,
    over_http1_a_client_counts_twice,
    a_provider_found_speaking_http1_counts_twice,
);

const UNDER_400: &str = "# open files 400";

fn limit(proxy: &Proxy) -> f64 {
    metric_sum(&proxy.metrics(), "ringside_client_connections_limit ", &[])
}

/// More streams at once than two descriptors each would allow, every one whole: none refused
/// at accept, no socket short of a descriptor.
fn over_http2_a_client_takes_one_descriptor(driver: &str) {
    let sim = SimTls::start(sim_opts(8, 250), true, H2Faults::default());
    let proxy = Proxy::start(driver, 1, UNDER_400, &sim.config("auto", "m"));
    assert_eq!(limit(&proxy), 331.0, "{}", proxy.metrics());
    // The running config says the setting and the cap it comes to now.
    let (_, cfg) = proxy.admin("GET", "/admin/config");
    assert_eq!(cfg["server"]["max_connections"], 0, "{cfg}");
    assert_eq!(cfg["server"]["max_connections_now"], 331, "{cfg}");
    assert_eq!(streams_at_once(&proxy, 250), 250, "every stream whole");
    let m = proxy.metrics();
    let refused = metric_sum(&m, "ringside_connections_refused_total", &[]);
    assert_eq!(refused, 0.0, "{m}");
    let short = metric_sum(&m, "ringside_local_resource_exhaustions_total", &[]);
    assert_eq!(short, 0.0, "{m}");
    let front = sim.front();
    assert_eq!(count(&front, "connections_http1"), 0, "{front}");
}

/// Under `http2 = "never"` the cap is half the descriptors: of 200 clients, 168 are held and
/// 32 closed at accept; the held ones gone, 150 streams at once (300 descriptors) are whole
/// with no socket short of one.
fn over_http1_a_client_counts_twice(driver: &str) {
    let sim = SimTls::start(sim_opts(8, 250), true, H2Faults::default());
    let server = format!("{UNDER_400}\nmax_connections_per_address = 100000");
    let proxy = Proxy::start(driver, 1, &server, &sim.config("never", "m"));
    assert_eq!(limit(&proxy), 168.0, "{}", proxy.metrics());
    let idle: Vec<_> = (0..200).map(|_| raw_client(proxy.addr)).collect();
    let refused = |m: &str| {
        let by = ["reason=\"max_connections\""];
        metric_sum(m, "ringside_connections_refused_total", &by)
    };
    let deadline = Instant::now() + T;
    loop {
        let m = proxy.metrics();
        let open = metric_sum(&m, "ringside_open_client_connections", &[]);
        if open == 168.0 && refused(&m) == 32.0 {
            break;
        }
        assert!(Instant::now() < deadline, "held {open}: {m}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(idle);
    // The proxy may see the closes after the next clients arrive on a loaded machine: wait
    // until it has let every held one go, or the new ones would meet the cap still full.
    let deadline = Instant::now() + T;
    while metric_sum(&proxy.metrics(), "ringside_open_client_connections", &[]) != 0.0 {
        assert!(Instant::now() < deadline, "{}", proxy.metrics());
        std::thread::sleep(Duration::from_millis(20));
    }
    let whole = streams_at_once(&proxy, 150);
    let m = proxy.metrics();
    assert_eq!(whole, 150, "every stream whole: {m}");
    let short = metric_sum(&m, "ringside_local_resource_exhaustions_total", &[]);
    assert_eq!(short, 0.0, "{m}");
    assert_eq!(refused(&m), 32.0, "{m}");
}

/// Set to HTTP/2 where offered, a provider whose TLS chooses HTTP/1.1 halves the cap from its
/// first connection on.
fn a_provider_found_speaking_http1_counts_twice(driver: &str) {
    let sim = SimTls::start(sim_opts(2, 0), false, H2Faults::default());
    let proxy = Proxy::start(driver, 1, UNDER_400, &sim.config("auto", "m"));
    assert_eq!(limit(&proxy), 331.0, "{}", proxy.metrics());
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(limit(&proxy), 168.0, "{}", proxy.metrics());
}
