//! The simulator with its TLS front (HTTP/2 and HTTP/1.1 over TLS), a CA and a `localhost`
//! certificate made fresh for each run.

use super::tempdir;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use ringside::simulate::front::{FrontOptions, H2Faults};
use ringside::simulate::{SimOptions, Simulator};
use std::net::SocketAddr;

pub struct SimTls {
    pub sim: Simulator,
    /// Where the front listens.
    pub tls: SocketAddr,
    pub ca_file: std::path::PathBuf,
    _dir: tempdir::Dir,
}

/// A CA, and a `localhost` certificate and key it signed, as PEM files in `dir`.
pub fn certificates(dir: &std::path::Path) -> (std::path::PathBuf, String, String) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "ringside simulator CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().expect("key");
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .signed_by(&leaf_key, &issuer)
        .expect("certificate");
    let (ca_file, cert, key) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&ca_file, ca_cert.pem()).expect("CA file");
    std::fs::write(&cert, leaf.pem()).expect("certificate file");
    std::fs::write(&key, leaf_key.serialize_pem()).expect("key file");
    let s = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    (ca_file, s(cert), s(key))
}

/// A config: provider `sim` at `https://localhost:PORT/v1` trusting `ca_file` (`http2` as
/// given), keys a and b serving `model`.
pub fn tls_provider_config(
    ca_file: &std::path::Path,
    port: u16,
    http2: &str,
    model: &str,
) -> String {
    format!(
        "[upstream]\nca_file = \"{}\"\n\n[[providers]]\nid = \"sim\"\ndialect = \"openai\"\n\
         base_url = \"https://localhost:{port}/v1\"\nhttp2 = \"{http2}\"\n\
         \x20 [[providers.connections]]\n  id = \"a\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"{model}\"]\n\
         \x20 [[providers.connections]]\n  id = \"b\"\n  key_env = \"SIM_KEY_B\"\n  models = [\"{model}\"]\n",
        ca_file.display(),
    )
}

impl SimTls {
    /// The simulator with `opts`, its front offering HTTP/2 (`http2`) with `faults`.
    pub fn start(opts: SimOptions, http2: bool, faults: H2Faults) -> SimTls {
        SimTls::start_offering(opts, (true, http2), faults)
    }

    /// The simulator with `opts`, its front offering HTTP/1.1 and HTTP/2 as `(http1, http2)`
    /// say, with `faults`.
    pub fn start_offering(opts: SimOptions, offer: (bool, bool), faults: H2Faults) -> SimTls {
        SimTls::launch(opts, offer, 100, faults)
    }

    /// The simulator with `opts`, its front offering both and saying it takes `max_streams`
    /// streams at once (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub fn start_taking(opts: SimOptions, max_streams: u32) -> SimTls {
        SimTls::launch(opts, (true, true), max_streams, H2Faults::default())
    }

    fn launch(mut opts: SimOptions, offer: (bool, bool), max: u32, faults: H2Faults) -> SimTls {
        let dir = tempdir::new();
        let (ca_file, cert_file, key_file) = certificates(&dir.0);
        let mut tries = 0;
        loop {
            let tls = super::addr(super::port());
            opts.listen = super::addr(super::port());
            opts.front = Some(FrontOptions {
                listen: tls,
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
                http2: offer.1,
                http1: offer.0,
                max_streams: max,
                faults: faults.clone(),
                relay_to: None,
            });
            match ringside::simulate::start(opts.clone()) {
                Ok(sim) => {
                    return SimTls {
                        sim,
                        tls,
                        ca_file,
                        _dir: dir,
                    };
                }
                Err(e) if tries < 5 => {
                    tries += 1;
                    eprintln!("simulator did not start ({e}), other ports");
                }
                Err(e) => panic!("simulator starts: {e}"),
            }
        }
    }

    /// A config: provider `sim` at the front (`http2` as given), keys a and b serving `model`.
    pub fn config(&self, http2: &str, model: &str) -> String {
        tls_provider_config(&self.ca_file, self.tls.port(), http2, model)
    }

    /// The front's counters (`/_sim/front`).
    pub fn front(&self) -> serde_json::Value {
        self.sim_get("/_sim/front")
    }

    /// The simulator's per-key counters (`/_sim/stats`).
    pub fn stats(&self) -> serde_json::Value {
        self.sim_get("/_sim/stats")
    }

    fn sim_get(&self, path: &str) -> serde_json::Value {
        let r = ringside::demo::client::request(self.sim.addr, "GET", path, &[], b"", super::T)
            .expect("simulator answers");
        serde_json::from_str(&r.text()).expect("JSON")
    }

    /// Inference requests the simulator served, over every key.
    pub fn attempts(&self) -> u64 {
        let s = self.stats();
        let keys = s["keys"].as_object().cloned().unwrap_or_default();
        keys.values()
            .map(|k| k["attempts"].as_u64().unwrap_or(0))
            .sum()
    }
}
