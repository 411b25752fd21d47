//! A reload that moves a provider (its base_url, and with it its CA) to another server: the
//! next requests reach the new one, not the connections the core kept to the old one, whether
//! those are pooled HTTP/1.1 connections or multiplexed HTTP/2 ones kept busy by traffic.

use crate::both_drivers;
use crate::common::sim_tls::{SimTls, tls_provider_config};
use crate::common::*;
use ringside::simulate::front::H2Faults;

both_drivers!(a_provider_moved_by_a_reload_is_reached_where_it_now_is);

/// `sim`'s provider with its own CA (not `[upstream]`'s, which a reload does not change).
fn provider_at(sim: &SimTls, http2: &str) -> String {
    let text = tls_provider_config(&sim.ca_file, sim.tls.port(), http2, "m");
    let (upstream, provider) = text.split_once("\n\n").unwrap_or_default();
    let ca = upstream.trim_start_matches("[upstream]\n");
    provider.replacen("http2 =", &format!("{ca}\nhttp2 ="), 1)
}

fn a_provider_moved_by_a_reload_is_reached_where_it_now_is(driver: &str) {
    for http2 in ["auto", "never"] {
        // Streams of 10 events 100 ms apart: one runs across the reload.
        let old = SimTls::start(super::h2::sim_opts(10, 100), true, H2Faults::default());
        let new = SimTls::start(super::h2::sim_opts(10, 100), true, H2Faults::default());
        let proxy = Proxy::start(driver, 1, "", &provider_at(&old, http2));
        for _ in 0..3 {
            let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
            assert_eq!(r.status, 200, "{http2}: {}", r.text());
        }
        let r = std::thread::scope(|s| {
            let across = s.spawn(|| proxy.post("/v1/chat/completions", &[], &chat("m", true)));
            std::thread::sleep(std::time::Duration::from_millis(300));
            let path = proxy.dir.0.join("ringside.toml");
            std::fs::write(&path, provider_at(&new, http2)).expect("config");
            let r = proxy.admin_with("POST", "/admin/reload", "");
            assert_eq!(r.status, 200, "{}", r.text());
            across.join().expect("thread")
        });
        // The stream begun before the reload ends whole where it began.
        assert!(
            r.text().ends_with("data: [DONE]\n\n"),
            "{http2}: {}",
            r.text()
        );
        let served = old.attempts();
        assert_eq!(served, 4, "{http2}");
        // Then nothing goes to the old server: not on a connection kept idle, nor on the one
        // that carried that stream, nor on a multiplexed one kept busy.
        for i in 0..3 {
            let r = proxy.post("/v1/chat/completions", &[], &chat("m", i == 0));
            assert_eq!(r.status, 200, "{http2}: {}", r.text());
        }
        assert_eq!(
            old.attempts(),
            served,
            "{http2}: nothing more to the old server"
        );
        assert_eq!(new.attempts(), 3, "{http2}: every request to the new one");
    }
}
