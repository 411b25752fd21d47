//! The data plane end to end: the real binary against the simulator or a scripted upstream,
//! once on io_uring and once on epoll. One test binary; a module per concern.

#[path = "../common/mod.rs"]
mod common;

mod admin_access;
mod after_commit;
mod audit_trail;
mod bad_input;
mod caps;
mod client_retries;
mod connects;
mod descriptors;
mod egress;
mod failover;
mod framing;
mod h2;
mod h2_answers;
mod h2_interop;
mod h2_keys;
mod hygiene;
mod open_mode;
mod operations;
mod pool;
mod reload_endpoint;
mod streams;
mod tls;
mod trust;

use common::*;
use ringside::simulate::SimOptions;

pub fn sim_proxy(driver: &str, opts: SimOptions) -> (ringside::simulate::Simulator, Proxy) {
    let sim = start_sim(opts);
    let body = openai_provider(
        "sim",
        sim.addr,
        &[("a", "SIM_KEY_A"), ("b", "SIM_KEY_B")],
        "\"gpt-4o-mini\"",
    ) + &format!(
        "[[providers]]\nid = \"ant\"\ndialect = \"anthropic\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"c\"\n  key_env = \"SIM_KEY_C\"\n  models = [\"claude-x\"]\n",
        sim.addr
    ) + "[[routes]]\nname = \"smart\"\nstrategy = \"priority\"\ntargets = [{ provider = \"sim\", model = \"gpt-4o-mini\" }]\n";
    let proxy = Proxy::start(
        driver,
        2,
        "",
        &format!("[limits]\nmax_body_bytes = 65536\nheader_read_timeout_ms = 400\n\n{body}"),
    );
    (sim, proxy)
}

pub fn raw_proxy(driver: &str, up: &RawUpstream, workers: usize) -> Proxy {
    let body = format!(
        "[[providers]]\nid = \"raw\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
        up.addr
    );
    Proxy::start(driver, workers, "", &body)
}
