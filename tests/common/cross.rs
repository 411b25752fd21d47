//! Providers of every API on one strict simulator, for the tests of fallbacks across them
//! (`tests/translation.rs`, `tests/cross_routes.rs`).

use super::start_sim;
use ringside::simulate::{SimOptions, parse_fault_arg};

/// One simulator standing in for every provider (strict), with faults by key.
pub fn sim(faults: &[&str]) -> ringside::simulate::Simulator {
    let mut opts = SimOptions {
        events: 3,
        strict: true,
        ..Default::default()
    };
    for f in faults {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    start_sim(opts)
}

/// Four providers on the simulator (OpenAI key a, Anthropic b, Gemini c, Azure d) and a route
/// over the first three in `order`.
pub fn config(sim: std::net::SocketAddr, order: &[&str], route_extra: &str) -> String {
    let mut s = String::new();
    for (id, dialect, base, key, extra) in [
        ("oa", "openai", format!("http://{sim}/v1"), "A", ""),
        ("an", "anthropic", format!("http://{sim}/v1"), "B", ""),
        ("gm", "gemini", format!("http://{sim}/v1beta"), "C", ""),
        (
            "az",
            "azure",
            format!("http://{sim}"),
            "D",
            "api_version = \"2024-10-21\"\n",
        ),
    ] {
        s.push_str(&format!(
            "[[providers]]\nid = \"{id}\"\ndialect = \"{dialect}\"\nbase_url = \"{base}\"\n{extra}\
             [[providers.connections]]\nid = \"k\"\nkey_env = \"SIM_KEY_{key}\"\n\n"
        ));
    }
    s.push_str(&format!("[[routes]]\nname = \"r\"\n{route_extra}"));
    for p in order {
        let model = match *p {
            "oa" => "gpt-x",
            "an" => "claude-x",
            "gm" => "gemini-x",
            _ => "deploy-x",
        };
        s.push_str(&format!(
            "[[routes.targets]]\nprovider = \"{p}\"\nmodel = \"{model}\"\n"
        ));
    }
    s
}
