//! The durable store end to end: what an operator must not lose on a restart is still there.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};

both_drivers!(terminal_states_and_admin_settings_survive_a_restart);

fn terminal_states_and_admin_settings_survive_a_restart(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=402").unwrap());
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a", "b"], "");
    let mut proxy = Proxy::start(driver, 2, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200);
    let r = ringside::demo::client::request(
        proxy.admin,
        "PATCH",
        "/admin/settings",
        &[],
        br#"{"flow":{"max_wait_ms":1234}}"#,
        T,
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert!(proxy.terminate().success());
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);

    let proxy = Proxy::start_in(driver, 2, "", &body, dir);
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "credits_exhausted", "{c}");
    let (_, s) = proxy.admin("GET", "/admin/settings");
    assert_eq!(s["flow"]["max_wait_ms"]["value"], 1234, "{s}");
    assert_eq!(s["flow"]["max_wait_ms"]["source"], "admin");
    // The terminal key is not tried again after the restart.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    // An operator reset is durable too.
    let (s, _) = proxy.admin("POST", "/admin/connections/sim/a/reset");
    assert_eq!(s, 200);
    let mut proxy = proxy;
    assert!(proxy.terminate().success());
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);
    let proxy = Proxy::start_in(driver, 2, "", &body, dir);
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "active", "{c}");
}
