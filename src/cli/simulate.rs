//! `ringside simulate`: the fault-injecting upstream simulator on its own.

use crate::simulate::{SimOptions, parse_fault_arg};
use clap::Args;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Args)]
#[command(after_help = "Faults: key:KEY=SPEC or model:MODEL=SPEC, for example
  --fault 'key:sk-sim-b=429;retry-after=2'   --fault 'model:gpt-x=reset-mid-stream;after=3'
(docs/simulator.md lists every fault).")]
pub(super) struct SimArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:9000", value_name = "IP:PORT")]
    listen: SocketAddr,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Events per streamed answer.
    #[arg(long, default_value_t = 8)]
    events: u32,
    /// Time between streamed events.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    interval_ms: u64,
    /// Time before every answer's head.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    latency_ms: u64,
    /// A fault to inject (repeatable).
    #[arg(long = "fault", value_name = "SELECTOR=SPEC", value_parser = parse_fault_arg)]
    faults: Vec<(crate::simulate::Selector, crate::simulate::fault::Fault)>,
    /// Use epoll even where io_uring works.
    #[arg(long)]
    epoll: bool,
    /// How long the OAuth access tokens it issues last (Claude subscription mode).
    #[arg(long, default_value_t = 3_600, value_name = "SECONDS")]
    token_lifetime_s: u64,
    /// Refuse (400) a body that breaks its API's rules, as a real provider would (Anthropic's
    /// required max_tokens and alternating roles, Gemini's contents, tool results after calls).
    #[arg(long)]
    strict: bool,
    /// Answer a request that offers tools with a call to its first tool (then text, once the
    /// request carries the tool's result).
    #[arg(long)]
    call_tools: bool,
    /// Also serve over TLS here (HTTP/2 and HTTP/1.1, chosen by ALPN), relayed to --listen.
    #[arg(long, value_name = "IP:PORT", requires_all = ["tls_cert", "tls_key"])]
    tls_listen: Option<SocketAddr>,
    /// The TLS front's certificate chain (PEM).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<String>,
    /// The TLS front's private key (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<String>,
    /// The TLS front offers HTTP/1.1 only (no h2 in ALPN).
    #[arg(long, conflicts_with = "no_http1")]
    no_http2: bool,
    /// The TLS front offers HTTP/2 only (no http/1.1 in ALPN).
    #[arg(long)]
    no_http1: bool,
    /// The TLS front's SETTINGS_MAX_CONCURRENT_STREAMS.
    #[arg(long, default_value_t = 100, value_name = "N")]
    max_streams: u32,
    /// An HTTP/2 fault of the TLS front (repeatable): refuse-every=N, goaway-after=N,
    /// drop-after=N, blackhole-after=N, slow-window=BYTES, http1-required=N,
    /// short-length-every=N, slow-handshake=MS.
    #[arg(long = "h2-fault", value_name = "NAME=N")]
    h2_faults: Vec<String>,
    /// Relay the TLS front's requests to another simulator's listener (not this one's): the
    /// front's descriptors and the simulator's in two processes.
    #[arg(long, value_name = "IP:PORT")]
    tls_relay_to: Option<SocketAddr>,
}

/// The TLS front's options, when `--tls-listen` asks for one.
fn front(a: &SimArgs) -> Result<Option<crate::simulate::front::FrontOptions>, String> {
    let (Some(listen), Some(cert), Some(key)) = (a.tls_listen, &a.tls_cert, &a.tls_key) else {
        return Ok(None);
    };
    let mut faults = crate::simulate::front::H2Faults::default();
    for f in &a.h2_faults {
        faults.parse_into(f)?;
    }
    Ok(Some(crate::simulate::front::FrontOptions {
        listen,
        cert_file: cert.clone(),
        key_file: key.clone(),
        http2: !a.no_http2,
        http1: !a.no_http1,
        max_streams: a.max_streams,
        faults,
        relay_to: a.tls_relay_to,
    }))
}

/// Run the simulator until SIGTERM or SIGINT.
pub(super) fn run(a: SimArgs) -> Result<(), String> {
    let opts = SimOptions {
        front: front(&a)?,
        listen: a.listen,
        workers: a.workers,
        faults: a.faults,
        events: a.events,
        interval_ms: a.interval_ms,
        latency_ms: a.latency_ms,
        force_epoll: a.epoll,
        token_lifetime_s: a.token_lifetime_s,
        strict: a.strict,
        call_tools: a.call_tools,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    let sim = crate::simulate::start(opts.clone())?;
    crate::log::event(
        "info",
        "simulator started",
        serde_json::json!({
            "listen": opts.listen.to_string(), "workers": opts.workers,
            "tls_listen": opts.front.as_ref().map(|f| f.listen.to_string()),
        }),
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    sim.stop();
    Ok(())
}
